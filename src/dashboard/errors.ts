/** The dashboard's own refusals, and how every error becomes a status and a JSON body. */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Schema } from "effect"
import { redactMessage } from "../domain/redact.js"

/** No Bearer token, or not the one of this start. A cookie is never read. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {}) {
  override get message() {
    return "Authorization: must be Bearer and the token of this dashboard's start (the #token= of the URL `relaykeep dashboard` printed)"
  }
}

/**
 * A Host header that is not a loopback name or address with this server's port: a page on
 * another site rebinding its name to 127.0.0.1 (DNS rebinding), or a request meant for
 * another local service. The message names the rule, never the header as sent.
 */
export class ForbiddenHost extends Schema.TaggedError<ForbiddenHost>()("ForbiddenHost", {
  port: Schema.Number
}) {
  override get message() {
    return `Host: must be localhost, 127.0.0.1 or [::1] with this dashboard's port, ${this.port}`
  }
}

/** A state-changing request sent by a page of another origin (CSRF). */
export class ForbiddenOrigin extends Schema.TaggedError<ForbiddenOrigin>()("ForbiddenOrigin", {}) {
  override get message() {
    return "Origin: a state-changing request must come from this dashboard's own origin, http://<its Host>"
  }
}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", {
  limitBytes: Schema.Number
}) {
  override get message() {
    return `the request body is larger than ${this.limitBytes} bytes`
  }
}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  {}
) {
  override get message() {
    return "Content-Type: must be application/json"
  }
}

/** No route or page file at the request's path (the message does not repeat the path). */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {}) {
  override get message() {
    return "path: nothing is served here; the page is at / and the API under /api/"
  }
}

const Statuses: Readonly<Record<string, number>> = {
  InvalidInput: 400,
  Unauthorized: 401,
  ForbiddenHost: 403,
  ForbiddenOrigin: 403,
  UnknownTask: 404,
  NotAGroup: 404,
  NotFound: 404,
  ConflictError: 409,
  GroupUnsettled: 409,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415
}

/** The status of an error by its tag: anything unexpected (storage, damaged records) is 500. */
export const statusOf = (tag: string): number => Statuses[tag] ?? 500

/** `{"error":{"tag","message"}}` with the status its tag calls for. */
export const errorResponse = (error: { readonly _tag: string; readonly message: string }) =>
  HttpServerResponse.unsafeJson(
    { error: { tag: error._tag, message: redactMessage(error.message) } },
    { status: statusOf(error._tag) }
  )

/** The server could not listen (the port is taken, or not ours to use). */
export class ServeFailed extends Schema.TaggedError<ServeFailed>()("ServeFailed", {
  port: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `cannot listen on 127.0.0.1:${this.port}: ${this.reason}`
  }
}
