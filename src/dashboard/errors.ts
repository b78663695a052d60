/** The dashboard's own refusals, and how every error becomes a status and a JSON body. */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Schema } from "effect"

/** No token, or not the right one. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {}) {
  override get message() {
    return "open the URL that `relaykeep dashboard` printed, or send Authorization: Bearer <token>"
  }
}

/** A Host header that is not a loopback name or address (DNS rebinding). */
export class ForbiddenHost extends Schema.TaggedError<ForbiddenHost>()("ForbiddenHost", {
  host: Schema.String
}) {
  override get message() {
    return `Host ${JSON.stringify(this.host)} is not a loopback name or address`
  }
}

/** A state-changing request from another origin, or one relying on the cookie without an Origin. */
export class ForbiddenOrigin extends Schema.TaggedError<ForbiddenOrigin>()("ForbiddenOrigin", {
  origin: Schema.String
}) {
  override get message() {
    return this.origin === ""
      ? "a state-changing request authenticated by the cookie must carry its Origin"
      : `Origin ${JSON.stringify(this.origin)} is not this dashboard`
  }
}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  limitBytes: Schema.Number
}) {
  override get message() {
    return `the request body is larger than ${this.limitBytes} bytes`
  }
}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", {
  contentType: Schema.String
}) {
  override get message() {
    return `the body must be application/json, not ${JSON.stringify(this.contentType)}`
  }
}

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { path: Schema.String }) {
  override get message() {
    return `nothing at ${this.path}`
  }
}

const Statuses: Readonly<Record<string, number>> = {
  InvalidInput: 400,
  Unauthorized: 401,
  ForbiddenHost: 403,
  ForbiddenOrigin: 403,
  UnknownTask: 404,
  NotFound: 404,
  ConflictError: 409,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415
}

/** The status of an error by its tag: anything unexpected (storage, damaged records) is 500. */
export const statusOf = (tag: string): number => Statuses[tag] ?? 500

/** `{"error":{"tag","message"}}` with the status its tag calls for. */
export const errorResponse = (error: { readonly _tag: string; readonly message: string }) =>
  HttpServerResponse.unsafeJson(
    { error: { tag: error._tag, message: error.message } },
    { status: statusOf(error._tag) }
  )
