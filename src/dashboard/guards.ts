/**
 * What every request passes before it reaches a route: a loopback Host (DNS rebinding), an
 * Origin that is this dashboard for state-changing requests (CSRF), the token (as a Bearer
 * header or the cookie), and, for JSON bodies, the content type, a size limit and UTF-8.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Effect, Stream } from "effect"
import { InvalidInput } from "../domain/errors.js"
import { decodeUtf8Field, parseJsonField } from "../domain/input.js"
import { ForbiddenHost, ForbiddenOrigin, PayloadTooLarge, UnsupportedMediaType } from "./errors.js"
import { isToken } from "./token.js"

export const CookieName = "relaykeep_dashboard"

/** A payload may be 1 MiB; the envelope around it gets 64 KiB more. */
export const MaxBodyBytes = 1024 * 1024 + 64 * 1024

/** Past this, an oversized body is no longer drained so that its 413 can be read: the connection drops. */
const MaxDrainBytes = 8 * 1024 * 1024

const LoopbackHost = /^(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?$/i

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

/** The Host header, when it names this machine's loopback. */
export const checkHost = (request: HttpServerRequest.HttpServerRequest) => {
  const host = header(request, "host") ?? ""
  return LoopbackHost.test(host) ? Effect.succeed(host) : Effect.fail(new ForbiddenHost({ host }))
}

export const isStateChanging = (request: HttpServerRequest.HttpServerRequest): boolean =>
  StateChanging.has(request.method)

/**
 * A state-changing request with an Origin must come from this dashboard's own origin. One
 * that relies on the cookie must carry an Origin at all (browsers send it on fetch POSTs), so
 * a cross-site form can never ride on the cookie.
 */
export const checkOrigin = (
  request: HttpServerRequest.HttpServerRequest,
  host: string,
  auth: Authentication
): Effect.Effect<void, ForbiddenOrigin> => {
  if (!isStateChanging(request)) return Effect.void
  const origin = header(request, "origin")
  if (origin === undefined)
    return auth === "cookie" ? Effect.fail(new ForbiddenOrigin({ origin: "" })) : Effect.void
  return origin.toLowerCase() === `http://${host}`.toLowerCase()
    ? Effect.void
    : Effect.fail(new ForbiddenOrigin({ origin }))
}

export type Authentication = "bearer" | "cookie" | "none"

/** How the request proves it holds the token, if it does. */
export const authenticationOf = (
  request: HttpServerRequest.HttpServerRequest,
  token: string
): Authentication => {
  const authorization = header(request, "authorization")
  const bearer = authorization === undefined ? undefined : /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1]
  if (bearer !== undefined && isToken(token, bearer)) return "bearer"
  const cookie = request.cookies[CookieName]
  if (cookie !== undefined && isToken(token, cookie)) return "cookie"
  return "none"
}

/** The cookie that keeps the token in the browser: never readable by scripts, never sent cross-site. */
export const tokenCookie = (token: string) => `${CookieName}=${token}; HttpOnly; SameSite=Strict; Path=/`

/**
 * The body as JSON: `application/json`, at most MaxBodyBytes, UTF-8, parseable. An oversized
 * body is drained (up to a bound) before the 413, so that the client can read the answer.
 */
export const readJsonBody = (request: HttpServerRequest.HttpServerRequest) =>
  Effect.gen(function* () {
    const contentType = header(request, "content-type") ?? ""
    if (!/^application\/json\s*(;|$)/i.test(contentType))
      return yield* new UnsupportedMediaType({ contentType })
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
