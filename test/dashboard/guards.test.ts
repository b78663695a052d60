/**
 * The guards one by one, on requests built in memory: the Bearer header is the only
 * credential (a cookie or a query parameter is never read), the Host must name loopback with
 * the server's own port, a state-changing request may not come from another origin, and no
 * refusal repeats what was sent.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { checkHost, checkOrigin, isAuthorized } from "../../src/dashboard/guards.js"

const token = "3f9c".repeat(16)
const other = "0".repeat(64)
const Port = 43127

const requestWith = (headers: Readonly<Record<string, string>>, method = "GET", url = "/api/tasks") =>
  HttpServerRequest.fromWeb(
    new Request(`http://127.0.0.1:${Port}${url}`, { method, headers: new Headers(headers) })
  )

describe("dashboard guards", () => {
  it("the Bearer header with this start's token is accepted, in any case of the scheme", () => {
    for (const value of [`Bearer ${token}`, `bearer ${token}`, `BEARER  ${token} `])
      assert.isTrue(isAuthorized(requestWith({ authorization: value }), token), value)
  })

  it("anything else is refused: another token, a cookie, the query, another scheme", () => {
    const refused: ReadonlyArray<HttpServerRequest.HttpServerRequest> = [
      requestWith({}),
      requestWith({ authorization: `Bearer ${other}` }),
      requestWith({ authorization: `Bearer ${token.slice(1)}` }),
      requestWith({ authorization: `Bearer ${token}x` }),
      requestWith({ authorization: `Basic ${token}` }),
      requestWith({ authorization: token }),
      // The cookie of the dashboard before issue 16, holding the right token: never read.
      requestWith({ cookie: `relaykeep_dashboard=${token}` }),
      requestWith({ cookie: `token=${token}` }),
      requestWith({}, "GET", `/api/tasks?token=${token}`),
      requestWith({ "x-relaykeep-token": token })
    ]
    for (const request of refused)
      assert.isFalse(isAuthorized(request, token), JSON.stringify(request.headers))
  })

  it.effect("a Host naming loopback with the server's port is accepted, as sent", () =>
    Effect.gen(function* () {
      for (const host of [`127.0.0.1:${Port}`, `localhost:${Port}`, `LOCALHOST:${Port}`, `[::1]:${Port}`]) {
        assert.strictEqual(yield* checkHost(requestWith({ host }), Port), host)
      }
    })
  )

  it.effect("a Host with another port, no port, or not loopback is ForbiddenHost, quoting nothing", () =>
    Effect.gen(function* () {
      for (const host of [
        "127.0.0.1:99999",
        "127.0.0.1:1",
        `127.0.0.1:${Port + 1}`,
        `127.0.0.1:0${Port}`,
        `127.0.0.1:${Port}0`,
        "127.0.0.1:",
        "127.0.0.1",
        "localhost",
        "[::1]",
        `evil.example:${Port}`,
        `127.0.0.1.evil.example:${Port}`,
        `10.0.0.1:${Port}`,
        `127.0.0.2:${Port}`,
        `[::2]:${Port}`,
        ""
      ]) {
        const error = yield* Effect.flip(checkHost(requestWith(host === "" ? {} : { host }), Port))
        assert.strictEqual(error._tag, "ForbiddenHost", host)
        assert.strictEqual(
          error.message,
          `Host: must be localhost, 127.0.0.1 or [::1] with this dashboard's port, ${Port}`
        )
      }
      // Without a port only when the server is on port 80, as HTTP leaves :80 out.
      assert.strictEqual(yield* checkHost(requestWith({ host: "127.0.0.1" }), 80), "127.0.0.1")
      assert.isTrue(
        Either.isLeft(yield* Effect.either(checkHost(requestWith({ host: "127.0.0.1:8080" }), 80)))
      )
    })
  )

  it.effect("a state-changing request from another origin is ForbiddenOrigin; its own, or none, passes", () =>
    Effect.gen(function* () {
      const host = `127.0.0.1:${Port}`
      for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
        for (const origin of [
          "http://evil.example",
          `http://localhost:${Port}`,
          `http://127.0.0.1:${Port + 1}`,
          `https://127.0.0.1:${Port}`,
          "null"
        ]) {
          const error = yield* Effect.flip(checkOrigin(requestWith({ origin }, method), host))
          assert.strictEqual(error._tag, "ForbiddenOrigin", `${method} ${origin}`)
          assert.notInclude(error.message, origin)
        }
        yield* checkOrigin(requestWith({ origin: `http://${host}` }, method), host)
        yield* checkOrigin(requestWith({ origin: `HTTP://127.0.0.1:${Port}` }, method), host)
        // No Origin: not a browser's cross-site request (browsers send one); the token is still needed.
        yield* checkOrigin(requestWith({}, method), host)
      }
      // Reads are not checked: a cross-origin page cannot read the answer, nor send the token.
      yield* checkOrigin(requestWith({ origin: "http://evil.example" }, "GET"), host)
    })
  )
})
