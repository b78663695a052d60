/**
 * The guards of the dashboard's server over a real HTTP connection: the Bearer header is the
 * only credential (a cookie or the query, even with the right token, is a 401), the page's
 * files are served to anyone and nothing else is, the Host must name the server's own port,
 * and a state-changing request from another origin is refused; every refusal changes nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import { jsonBody, postJson, withDashboard } from "../support/dashboard.js"
import type { RequestOptions } from "../support/http.js"
import { errorMessage, errorTag } from "../support/http.js"

describe("dashboard server: the guards", () => {
  it.live("no token, a wrong one, or the right one in a cookie or the query → 401 on every API route", () =>
    withDashboard(({ call, token, port, store, unchanged }) =>
      Effect.gen(function* () {
        yield* store.submit({ clientRequestId: ClientRequestId.make("existing"), payload: {} })
        yield* unchanged(
          Effect.gen(function* () {
            const wrong = "0".repeat(64) === token ? "1".repeat(64) : "0".repeat(64)
            const own = { origin: `http://127.0.0.1:${port}` }
            // The cookie the dashboard set before issue 16, now with the right token: never read.
            const cookie = { cookie: `relaykeep_dashboard=${token}` }
            const refused: ReadonlyArray<readonly [string, RequestOptions]> = [
              ["/api/tasks", {}],
              ["/api/tasks", { headers: { authorization: `Bearer ${wrong}` } }],
              ["/api/tasks", { headers: { authorization: "Bearer abc" } }],
              ["/api/tasks", { headers: { authorization: `Basic ${token}` } }],
              ["/api/tasks", { headers: cookie }],
              [`/api/tasks?token=${token}`, {}],
              ["/api/events", { headers: cookie }],
              [`/api/tasks/${"a".repeat(64)}`, { headers: cookie }],
              ["/api/tasks", postJson({ ...cookie, ...own }, jsonBody({ payload: { a: 1 } }))],
              [`/api/tasks/${"a".repeat(64)}/cancel`, { method: "POST", headers: { ...cookie, ...own } }],
              ["/api/nowhere", { headers: cookie }]
            ]
            for (const [target, options] of refused) {
              const reply = yield* call(target, options)
              assert.strictEqual(reply.status, 401, `${target} ${JSON.stringify(options.headers)}`)
              assert.strictEqual(errorTag(reply), "Unauthorized")
              assert.notInclude(reply.body, token)
            }
            // Health says it is up, and no more, to a cookie as to anyone.
            const health = yield* call("/api/health", { headers: cookie })
            assert.deepStrictEqual(JSON.parse(health.body), { status: "ok", version: "0.1.0" })
          })
        )
      })
    )
  )

  it.live("the page's files are served without the token (they hold no data); nothing else is", () =>
    withDashboard(({ call, token }) =>
      Effect.gen(function* () {
        const page = yield* call("/")
        assert.strictEqual(page.status, 200)
        assert.match(page.headers["content-type"] ?? "", /^text\/html/)
        assert.include(page.body, "<title>RelayKeep</title>")
        assert.strictEqual((yield* call("/index.html")).body, page.body)
        const script = yield* call("/app.js")
        assert.match(script.headers["content-type"] ?? "", /^text\/javascript/)
        const style = yield* call("/app.css")
        assert.match(style.headers["content-type"] ?? "", /^text\/css/)
        // The printed URL of old, the token in the query: the same page, and no cookie (call checks).
        const oldLink = yield* call(`/?token=${token}`)
        assert.strictEqual(oldLink.status, 200)
        assert.strictEqual(oldLink.body, page.body)
        for (const [target, method] of [
          ["/secret.txt", "GET"],
          ["/page/index.html", "GET"],
          ["/", "POST"],
          ["/app.js", "DELETE"]
        ] as const) {
          const reply = yield* call(target, { method, headers: { authorization: `Bearer ${token}` } })
          assert.strictEqual(reply.status, 404, `${method} ${target}`)
          assert.strictEqual(errorTag(reply), "NotFound")
          assert.strictEqual(
            errorMessage(reply),
            "path: nothing is served here; the page is at / and the API under /api/"
          )
        }
      })
    )
  )

  it.live("a foreign Host, or a loopback one with another port or none → 403, even with the token", () =>
    withDashboard(({ call, bearer, port, unchanged }) =>
      unchanged(
        Effect.gen(function* () {
          for (const host of [
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil:80",
            "10.0.0.1",
            "[::2]:80",
            "127.0.0.1:99999",
            "127.0.0.1:1",
            `127.0.0.1:${port + 1}`,
            `localhost:0${port}`,
            "127.0.0.1",
            "localhost",
            `evil.example:${port}`
          ]) {
            const reply = yield* call("/api/tasks", postJson({ ...bearer, host }, jsonBody({ payload: {} })))
            assert.strictEqual(reply.status, 403, host)
            assert.strictEqual(errorTag(reply), "ForbiddenHost")
            assert.strictEqual(
              errorMessage(reply),
              `Host: must be localhost, 127.0.0.1 or [::1] with this dashboard's port, ${port}`
            )
            // Nor the page: a rebinding site gets not even the script.
            assert.strictEqual((yield* call("/app.js", { headers: { host } })).status, 403, host)
          }
          const health = yield* call("/api/health", { headers: { host: "evil.example" } })
          assert.strictEqual(health.status, 403)
          for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
            const reply = yield* call("/api/tasks", { headers: { ...bearer, host } })
            assert.strictEqual(reply.status, 200, host)
          }
        })
      )
    )
  )

  it.live(
    "a POST with a foreign Origin → 403, token or not; its own Origin, or none, with the token passes",
    () =>
      withDashboard(({ call, bearer, port, unchanged }) =>
        Effect.gen(function* () {
          yield* unchanged(
            Effect.gen(function* () {
              const body = jsonBody({ payload: { a: 1 } })
              for (const origin of [
                "http://evil.example",
                `http://localhost:${port + 1}`,
                `http://localhost:${port}`,
                "null",
                `https://127.0.0.1:${port}`
              ]) {
                for (const headers of [{ ...bearer, origin }, { origin }]) {
                  const reply = yield* call("/api/tasks", postJson(headers, body))
                  assert.strictEqual(reply.status, 403, origin)
                  assert.strictEqual(errorTag(reply), "ForbiddenOrigin")
                  assert.notInclude(reply.body, origin === "null" ? '"null"' : origin)
                }
              }
              const cancel = yield* call(`/api/tasks/${"a".repeat(64)}/cancel`, {
                method: "POST",
                headers: { ...bearer, origin: "http://evil.example" }
              })
              assert.strictEqual(cancel.status, 403)
            })
          )
          const own = yield* call(
            "/api/tasks",
            postJson({ ...bearer, origin: `http://127.0.0.1:${port}` }, "{}")
          )
          assert.strictEqual(own.status, 400, "past the guards, to the body's check")
          const viaLocalhost = yield* call(
            "/api/tasks",
            postJson(
              { ...bearer, origin: `http://localhost:${port}`, host: `localhost:${port}` },
              jsonBody({ payload: {} })
            )
          )
          assert.strictEqual(viaLocalhost.status, 201)
          const none = yield* call("/api/tasks", postJson(bearer, jsonBody({ payload: { b: 1 } })))
          assert.strictEqual(none.status, 201)
        })
      )
  )
})
