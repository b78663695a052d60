/**
 * How a call to a local model server fails: redirects are not followed, proxies are not used,
 * a 500 or a dead server may pass later, a slow answer times out, a flood is cut, junk is a reason.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { failureTagged, providerLayer, runProvider, settings, successOf } from "../support/fakeCli.js"
import { fakeServer, json, modelServer, recordOnly } from "../support/fakeModelServer.js"
import { httpPayload, httpProviders } from "./httpProviders.js"

describe("failures of local HTTP model providers", { timeout: 120_000 }, () => {
  for (const p of httpProviders) {
    const payload = () => httpPayload(p)

    it.scopedLive(`${p.name}: a 302 is not followed; the redirect target is never reached`, () =>
      Effect.gen(function* () {
        const target = yield* fakeServer(recordOnly)
        const server = yield* fakeServer(() => ({ _tag: "Redirect", location: `${target.url}${p.path}` }))
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings(p.at(server.url))))),
          "ProviderFailed"
        )
        assert.strictEqual(failure.message, `${p.name}: HTTP 302: redirects are not followed`)
        assert.strictEqual(failure.receipt?.http_status, 302)
        assert.strictEqual(server.requests.length, 1)
        assert.deepStrictEqual(target.requests, [], "the redirect target saw nothing")
      })
    )

    it.scopedLive(`${p.name}: a 500 fails the task, retryable, with the body as stdout_error`, () =>
      Effect.gen(function* () {
        const server = yield* fakeServer(() => json({ error: "model crashed" }, 500))
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings(p.at(server.url))))),
          "ProviderFailed"
        )
        assert.strictEqual(failure.message, `${p.name}: HTTP 500`)
        assert.isTrue(failure.retryable)
        assert.strictEqual(failure.stdout_error, '{"error":"model crashed"}')
        assert.strictEqual(failure.receipt?.http_status, 500)
      })
    )

    it.scopedLive(`${p.name}: secrets in an error body are scrubbed from stdout_error`, () =>
      Effect.gen(function* () {
        const secrets = ["zQ9c0ffee5ecret0001", "zQ9c0ffee5ecret0002"]
        const server = yield* fakeServer(() =>
          json(
            { error: `rejected Authorization: Bearer ${secrets[0]} for postgres://u:${secrets[1]}@db/x` },
            401
          )
        )
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings(p.at(server.url))))),
          "ProviderFailed"
        )
        for (const secret of secrets) assert.notInclude(JSON.stringify(failure), secret)
        assert.match(failure.stdout_error ?? "", /^\{"error":"rejected Authorization: \[REDACTED\]/)
      })
    )

    it.scopedLive(`${p.name}: a server URL's user-info is not quoted when it cannot be reached`, () =>
      Effect.gen(function* () {
        const gone = yield* Effect.scoped(fakeServer(modelServer()))
        const withUser = gone.url.replace("http://", "http://admin:zQ9c0ffee5ecret0003@")
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings(p.at(withUser))))),
          "ProviderFailed"
        )
        assert.notInclude(JSON.stringify(failure), "zQ9c0ffee5ecret0003")
        assert.include(failure.message, "could not reach http://")
      })
    )

    it.scopedLive(`${p.name}: an answer slower than the task timeout fails with ProviderTimeout`, () =>
      Effect.gen(function* () {
        const server = yield* fakeServer((request) => ({
          _tag: "Slow",
          millis: 10_000,
          reply: modelServer()(request)
        }))
        const start = yield* Clock.currentTimeMillis
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(
            Effect.provide(providerLayer(settings({ ...p.at(server.url), taskTimeoutMillis: 500 })))
          ),
          "ProviderTimeout"
        )
        const waited = (yield* Clock.currentTimeMillis) - start
        assert.strictEqual(failure.millis, 500)
        assert.isAtLeast(waited, 500)
        assert.isBelow(waited, 10_000, "it did not wait for the slow answer")
      })
    )

    it.scopedLive(
      `${p.name}: an attempt stopped by the timeout or the cap still leaves a receipt (item 11)`,
      () =>
        Effect.gen(function* () {
          const slow = yield* fakeServer(() => ({ _tag: "Slow", millis: 10_000, reply: json({}) }))
          const huge = yield* fakeServer(() => ({ _tag: "Huge", bytes: 8 * 1024 * 1024 }))
          const limits = { taskTimeoutMillis: 500, maxOutputBytes: 64 * 1024 }
          const timedOut = failureTagged(
            yield* runProvider(payload()).pipe(
              Effect.provide(providerLayer(settings({ ...p.at(slow.url), ...limits })))
            ),
            "ProviderTimeout"
          )
          const flooded = failureTagged(
            yield* runProvider(payload()).pipe(
              Effect.provide(providerLayer(settings({ ...p.at(huge.url), ...limits })))
            ),
            "OutputTooLarge"
          )
          for (const receipt of [timedOut.receipt, flooded.receipt]) {
            assert.strictEqual(receipt?.provider, p.name)
            assert.strictEqual(receipt?.requested_model, p.model)
            assert.strictEqual(receipt?.model, null)
            assert.strictEqual(receipt?.exit_code, null)
            assert.strictEqual(receipt?.cost_usd, null)
          }
        })
    )

    it.scopedLive(`${p.name}: a body past --max-output fails with OutputTooLarge`, () =>
      Effect.gen(function* () {
        const server = yield* fakeServer(() => ({ _tag: "Huge", bytes: 8 * 1024 * 1024 }))
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(
            Effect.provide(providerLayer(settings({ ...p.at(server.url), maxOutputBytes: 64 * 1024 })))
          ),
          "OutputTooLarge"
        )
        assert.strictEqual(failure.limitBytes, 64 * 1024)
      })
    )

    it.scopedLive(`${p.name}: a 200 that is not the expected JSON fails with a reason, not a crash`, () =>
      Effect.gen(function* () {
        const server = yield* fakeServer(() => json({ unexpected: true }))
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings(p.at(server.url))))),
          "ProviderFailed"
        )
        assert.match(failure.message, /^(ollama|openai): the answer is not/)
        assert.isFalse(failure.retryable)
        assert.strictEqual(failure.receipt?.http_status, 200)
      })
    )

    it.scopedLive(`${p.name}: a server that is down fails the attempt, retryable`, () =>
      Effect.gen(function* () {
        const gone = yield* Effect.scoped(fakeServer(modelServer()))
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings(p.at(gone.url))))),
          "ProviderFailed"
        )
        assert.isTrue(failure.message.startsWith(`${p.name}: could not reach ${gone.url}`), failure.message)
        assert.isTrue(failure.retryable)
      })
    )

    it.scopedLive(`${p.name}: proxy variables are ignored; the request goes straight to the server`, () =>
      Effect.gen(function* () {
        const proxy = yield* fakeServer(recordOnly)
        const server = yield* fakeServer(modelServer())
        const names = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"]
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            const before = { ...process.env }
            for (const name of names) process.env[name] = proxy.url
            process.env["NO_PROXY"] = ""
            process.env["no_proxy"] = ""
            return before
          }),
          (before) =>
            Effect.sync(() => {
              for (const name of [...names, "NO_PROXY", "no_proxy"]) {
                const value = before[name]
                if (value === undefined) delete process.env[name]
                else process.env[name] = value
              }
            })
        )
        successOf(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings(p.at(server.url)))))
        )
        assert.strictEqual(server.requests.length, 1)
        assert.deepStrictEqual(proxy.requests, [], "the proxy saw nothing")
      })
    )
  }
})
