/**
 * Ollama and OpenAI-compatible servers, played by fake servers on 127.0.0.1: one non-streaming
 * JSON POST with the model in the body, the answer and its receipt; the reported model must
 * equal the requested one, and the record says it is reported, not verified.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import {
  failureOf,
  failureTagged,
  providerLayer,
  runProvider,
  settings,
  submitAndRun,
  successOf,
  url,
  workerLayer
} from "../support/fakeCli.js"
import { fakeServer, modelServer } from "../support/fakeModelServer.js"
import { httpPayload, httpProviders, reportedSource } from "./httpProviders.js"
import { ModelMismatch } from "../../src/domain/errors.js"

describe("local HTTP model providers", { timeout: 120_000 }, () => {
  for (const p of httpProviders) {
    const payload = (prompt?: string) => httpPayload(p, prompt)

    it.scopedLive(
      `${p.name}: a non-streaming POST with the model in the body; the answer and its receipt`,
      () =>
        Effect.gen(function* () {
          const server = yield* fakeServer(modelServer())
          const view = yield* submitAndRun(payload()).pipe(
            Effect.provide(workerLayer(settings(p.at(server.url))))
          )
          assert.strictEqual(server.requests.length, 1)
          const [request] = server.requests
          assert.strictEqual(request?.method, "POST")
          assert.strictEqual(request?.path, p.path)
          assert.match(request?.headers["content-type"] ?? "", /^application\/json/)
          assert.deepStrictEqual(JSON.parse(request?.body ?? "null"), p.body(p.model, payload().prompt))
          assert.strictEqual(view.state, "complete")
          const receipt = view.attempts[0]?.receipt
          if (receipt === undefined) return assert.fail("the attempt has no receipt")
          const answer = Buffer.from(server.replies[0] ?? "", "utf8")
          assert.deepStrictEqual(
            { ...receipt, started_at: "", ended_at: "", duration_ms: 0 },
            {
              provider: p.name,
              requested_model: p.model,
              model: p.model,
              model_evidence: { verified: false, source: reportedSource },
              started_at: "",
              ended_at: "",
              duration_ms: 0,
              exit_code: null,
              http_status: 200,
              usage: p.usage,
              cost_usd: null,
              output_sha256: createHash("sha256").update(answer).digest("hex"),
              output_bytes: answer.length
            }
          )
          assert.deepStrictEqual(view.result, {
            provider: p.name,
            requested_model: p.model,
            model: p.model,
            model_evidence: { verified: false, source: reportedSource },
            text: p.text
          })
        })
    )

    it.scopedLive(
      `${p.name}: a server reporting another model fails with ModelMismatch, reported not verified`,
      () =>
        Effect.gen(function* () {
          const server = yield* fakeServer(modelServer({ reportAs: "other-model:latest" }))
          const view = yield* submitAndRun(payload()).pipe(
            Effect.provide(workerLayer(settings(p.at(server.url))))
          )
          assert.strictEqual(view.state, "failed")
          assert.deepStrictEqual(view.error, {
            tag: "ModelMismatch",
            message: `${p.name} reported model "other-model:latest", not the requested "${p.model}" (as reported by the server, not verified)`,
            retryable: false
          })
          const receipt = view.attempts[0]?.receipt
          assert.strictEqual(receipt?.requested_model, p.model)
          assert.strictEqual(receipt?.model, "other-model:latest")
          assert.deepStrictEqual(receipt?.model_evidence, { verified: false, source: reportedSource })
        })
    )

    it.scopedLive(
      `${p.name}: a 200 KB model name from the server is kept cut, in the receipt and the error`,
      () =>
        Effect.gen(function* () {
          const huge = "m".repeat(200_000)
          const server = yield* fakeServer(modelServer({ reportAs: huge }))
          const view = yield* submitAndRun(payload()).pipe(
            Effect.provide(workerLayer(settings(p.at(server.url))))
          )
          assert.strictEqual(view.error?.tag, "ModelMismatch")
          assert.strictEqual(view.attempts[0]?.receipt?.model, `${"m".repeat(200)} [truncated]`)
          assert.isBelow(view.error?.message.length ?? Infinity, 1100, "the message stays bounded")
        })
    )

    it.scopedLive(
      `${p.name}: a reported model holding secrets is scrubbed in the receipt, the error and the answer`,
      () =>
        Effect.gen(function* () {
          const secrets = ["Pw-9d1c7e55aa", "ghp_Qm7t2RkVx9wLp4sZa8bN3cYe6dHf1gJi0KuT", "Zk4-bearer-77ac01"]
          const reported = `postgres://admin:${secrets[0]}@db:5432/x ${secrets[1]} Authorization: Bearer ${secrets[2]}`
          const server = yield* fakeServer(modelServer({ reportAs: reported }))
          const view = yield* submitAndRun(payload()).pipe(
            Effect.provide(workerLayer(settings(p.at(server.url))))
          )
          assert.strictEqual(view.error?.tag, "ModelMismatch")
          const shown = JSON.stringify(view)
          for (const secret of secrets) assert.notInclude(shown, secret)
          assert.include(view.attempts[0]?.receipt?.model ?? "", "postgres://[REDACTED]@db:5432/x")
          assert.include(view.error?.message ?? "", "postgres://[REDACTED]@db:5432/x")
        })
    )

    it.scopedLive(`${p.name}: a payload with an extra key or an empty model sends nothing`, () =>
      Effect.gen(function* () {
        const server = yield* fakeServer(modelServer())
        const layer = providerLayer(settings(p.at(server.url)))
        const extra = failureOf(
          yield* runProvider({ ...payload(), stream: true }).pipe(Effect.provide(layer))
        )
        const empty = failureOf(yield* runProvider({ ...payload(), model: "" }).pipe(Effect.provide(layer)))
        assert.deepStrictEqual([extra._tag, empty._tag], ["InvalidPayload", "InvalidPayload"])
        assert.match(extra.message, /stream/)
        assert.deepStrictEqual(server.requests, [])
      })
    )

    it.scopedLive(`${p.name}: without a URL the provider is unavailable`, () =>
      Effect.gen(function* () {
        const failure = failureTagged(
          yield* runProvider(payload()).pipe(Effect.provide(providerLayer(settings()))),
          "ProviderUnavailable"
        )
        assert.strictEqual(failure.message, `${p.name} is not available: no --${p.name}-url is configured`)
      })
    )
  }

  it.scopedLive(
    "a reported model of 1,500 characters is cut at 200, marked, in the receipt and the error",
    () =>
      Effect.gen(function* () {
        const reported = `huge-${"m".repeat(1500)}`
        const server = yield* fakeServer(modelServer({ reportAs: reported }))
        const view = yield* submitAndRun({ provider: "ollama", model: "llama3.2:1b", prompt: "hi" }).pipe(
          Effect.provide(workerLayer(settings({ ollamaUrl: url(server.url) })))
        )
        const cut = `${reported.slice(0, 200)} [truncated]`
        assert.strictEqual(view.error?.tag, "ModelMismatch")
        assert.strictEqual(
          view.error?.message,
          `ollama reported model ${JSON.stringify(cut)}, not the requested "llama3.2:1b" (as reported by the server, not verified)`
        )
        assert.strictEqual(view.attempts[0]?.receipt?.model, cut)
      })
  )

  it.scopedLive("a runaway usage object from the server is kept as its size only", () =>
    Effect.gen(function* () {
      const usage = { prompt_tokens: 1, padding: "u".repeat(200_000) }
      const server = yield* fakeServer((request) => {
        const reply = modelServer()(request)
        return reply._tag === "Json" && typeof reply.body === "object" && reply.body !== null
          ? { ...reply, body: { ...reply.body, usage } }
          : reply
      })
      const view = yield* submitAndRun({ provider: "openai", model: "local-model", prompt: "hi" }).pipe(
        Effect.provide(workerLayer(settings({ openaiUrl: url(server.url) })))
      )
      assert.strictEqual(view.state, "complete")
      assert.deepStrictEqual(view.attempts[0]?.receipt?.usage, {
        truncated: true,
        json_bytes: JSON.stringify(usage).length
      })
      assert.isBelow(JSON.stringify(view.attempts).length, 4096, "the attempt stays small")
    })
  )

  it("a ModelMismatch built with unbounded names still quotes them bounded", () => {
    const error = new ModelMismatch({
      provider: "ollama",
      requested: "r".repeat(100_000),
      reported: "m".repeat(100_000)
    })
    assert.isBelow(error.message.length, 600)
    assert.include(error.message, `${"m".repeat(200)} [truncated]`)
    assert.include(error.message, `${"r".repeat(200)} [truncated]`)
  })

  it.scopedLive("an OpenAI base URL that ends in /v1 is not doubled", () =>
    Effect.gen(function* () {
      const server = yield* fakeServer(modelServer())
      successOf(
        yield* runProvider({ provider: "openai", model: "local-model", prompt: "hi" }).pipe(
          Effect.provide(providerLayer(settings({ openaiUrl: url(`${server.url}/v1`) })))
        )
      )
      assert.deepStrictEqual(
        server.requests.map((r) => `${r.method} ${r.path}`),
        ["POST /v1/chat/completions"]
      )
    })
  )
})
