/** Ollama on this machine: POST /api/generate, non-streaming, the model in the JSON body. */
import type { HttpClient } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { ModelMismatch, ProviderFailed, ProviderUnavailable } from "../domain/errors.js"
import { decodePayload } from "./payload.js"
import type { ProviderDefinition } from "./registry.js"
import { httpReceipt, postJson, reportedModel, statusFailure } from "./http.js"
import type { ProviderSettings } from "./settings.js"
import { endpoint } from "./settings.js"

const OllamaAnswer = Schema.parseJson(
  Schema.Struct({
    model: Schema.String,
    response: Schema.String,
    prompt_eval_count: Schema.optional(Schema.Number),
    eval_count: Schema.optional(Schema.Number)
  })
)
const decodeAnswer = Schema.decodeUnknownEither(OllamaAnswer)

export const makeOllamaProvider = (settings: ProviderSettings) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<HttpClient.HttpClient>()
    const definition: ProviderDefinition = {
      name: "ollama",
      run: (task) =>
        Effect.gen(function* () {
          const payload = yield* decodePayload("ollama", task.payload)
          const base = settings.ollamaUrl
          if (base === undefined)
            return yield* new ProviderUnavailable({
              provider: "ollama",
              reason: "no --ollama-url is configured"
            })
          const outcome = yield* postJson(
            "ollama",
            payload.model,
            endpoint(base, "/api/generate"),
            { model: payload.model, prompt: payload.prompt, stream: false },
            settings
          )
          const answer = decodeAnswer(outcome.text)
          const reported = Either.isRight(answer) ? answer.right.model : null
          const usage = Either.isRight(answer)
            ? {
                prompt_eval_count: answer.right.prompt_eval_count ?? null,
                eval_count: answer.right.eval_count ?? null
              }
            : null
          const receipt = httpReceipt("ollama", payload.model, reported, outcome, usage)
          if (outcome.status < 200 || outcome.status >= 300)
            return yield* statusFailure("ollama", outcome, receipt)
          if (Either.isLeft(answer)) {
            return yield* new ProviderFailed({
              provider: "ollama",
              reason: "the answer is not Ollama's JSON",
              retryable: false,
              receipt
            })
          }
          if (answer.right.model !== payload.model) {
            return yield* new ModelMismatch({
              provider: "ollama",
              requested: payload.model,
              reported: reportedModel(answer.right.model),
              receipt
            })
          }
          return {
            result: {
              provider: "ollama",
              requested_model: payload.model,
              model: answer.right.model,
              model_evidence: receipt.model_evidence,
              text: answer.right.response
            },
            receipt
          }
        }).pipe(Effect.provide(context))
    }
    return definition
  })
