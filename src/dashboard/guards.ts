/**
 * What every request passes before it reaches a route: a Host naming this server, loopback
 * and its own port (against DNS rebinding, and requests meant for another local service), an
 * Origin that is this dashboard for state-changing requests (CSRF), the token as a Bearer
 * header (a cookie is never set or read: cookies are not scoped to a port), and, for JSON
 * bodies, the content type, a size limit and UTF-8.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Stream } from "effect"
import { InvalidInput } from "../domain/errors.js"
import { decodeUtf8Field, parseJsonField } from "../domain/input.js"
import { ForbiddenHost, ForbiddenOrigin, PayloadTooLarge, UnsupportedMediaType } from "./errors.js"
import { isToken } from "./token.js"

/** A payload may be 1 MiB; the envelope around it gets 64 KiB more. */
export const MaxBodyBytes = 1024 * 1024 + 64 * 1024

/** Past this, an oversized body is no longer drained so that its 413 can be read: the connection drops. */
const MaxDrainBytes = 8 * 1024 * 1024

const LoopbackHost = /^(?:localhost|127\.0\.0\.1|\[::1\])(?::([0-9]{1,5}))?$/i

const BearerHeader = /^Bearer +([0-9a-f]{64}) *$/i

const StateChanging = new Set(["POST", "PUT", "PATCH", "DELETE"])

export const SecurityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer"
}

/** The headers every response carries; /api/* answers are never cached. */
export const withSecurityHeaders = (pathname: string) => (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(
    response,
    pathname.startsWith("/api/") ? { ...SecurityHeaders, "cache-control": "no-store" } : SecurityHeaders
  )

const header = (request: HttpServerRequest.HttpServerRequest, name: string): string | undefined =>
  request.headers[name]

/**
 * The Host header, when it names this machine's loopback with `port`, the port the server
 * listens on: exactly its decimal digits, and no port at all only for port 80 (as HTTP omits
 * it there). A page of another local service's origin, or one rebinding its name, gets nothing.
 */
export const checkHost = (
  request: HttpServerRequest.HttpServerRequest,
  port: number
): Effect.Effect<string, ForbiddenHost> => {
  const host = header(request, "host") ?? ""
  const match = LoopbackHost.exec(host)
  if (match === null) return Effect.fail(new ForbiddenHost({ port }))
  const given = match[1]
  const right = given === undefined ? port === 80 : given === String(port)
  return right ? Effect.succeed(host) : Effect.fail(new ForbiddenHost({ port }))
}

export const isStateChanging = (request: HttpServerRequest.HttpServerRequest): boolean =>
  StateChanging.has(request.method)

/**
 * A state-changing request that carries an Origin must carry this dashboard's own,
 * `http://<Host>` (the Host already checked). Browsers send an Origin on every cross-origin
 * POST; one without is a program such as curl, which still needs the Bearer token.
 */
export const checkOrigin = (
  request: HttpServerRequest.HttpServerRequest,
  host: string
): Effect.Effect<void, ForbiddenOrigin> => {
  if (!isStateChanging(request)) return Effect.void
  const origin = header(request, "origin")
  if (origin === undefined) return Effect.void
  return origin.toLowerCase() === `http://${host}`.toLowerCase()
    ? Effect.void
    : Effect.fail(new ForbiddenOrigin())
}

/**
 * Whether the request carries `Authorization: Bearer <token>` with this start's token. Only
 * that header counts: a cookie, a query parameter or anything else is never read.
 */
export const isAuthorized = (request: HttpServerRequest.HttpServerRequest, token: string): boolean => {
  const bearer = BearerHeader.exec(header(request, "authorization") ?? "")?.[1]
  return bearer !== undefined && isToken(token, bearer)
}

/**
 * The body as JSON: `application/json`, at most MaxBodyBytes, UTF-8, parseable. An oversized
 * body is drained (up to a bound) before the 413, so that the client can read the answer.
 */
export const readJsonBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const contentType = header(request, "content-type") ?? ""
    if (!/^application\/json\s*(;|$)/i.test(contentType)) return yield* new UnsupportedMediaType()
    const state = { bytes: 0, chunks: new Array<Uint8Array>() }
    yield* request.stream.pipe(
      Stream.takeWhile(() => state.bytes <= MaxDrainBytes),
      Stream.runForEach((chunk) =>
        Effect.sync(() => {
          state.bytes += chunk.length
          if (state.bytes <= MaxBodyBytes) state.chunks.push(chunk)
        })
      ),
      Effect.mapError(() => new InvalidInput({ field: "body", reason: "could not be read" }))
    )
    if (state.bytes > MaxBodyBytes) return yield* new PayloadTooLarge({ limitBytes: MaxBodyBytes })
    const text = yield* decodeUtf8Field("body", Buffer.concat(state.chunks))
    return yield* parseJsonField("body", text)
  })
