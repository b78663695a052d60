/**
 * An OpenAI-compatible server on this machine (llama.cpp, LM Studio, vLLM, …): POST
 * /v1/chat/completions, non-streaming, one user message.
 */
import type { HttpClient } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { ModelMismatch, ProviderFailed, ProviderUnavailable } from "../domain/errors.js"
import { decodePayload } from "./payload.js"
import type { ProviderDefinition } from "./registry.js"
import { httpReceipt, postJson, reportedModel, statusFailure } from "./http.js"
import type { ProviderSettings } from "./settings.js"
import { endpoint } from "./settings.js"

const Completion = Schema.parseJson(
  Schema.Struct({
    model: Schema.String,
    choices: Schema.NonEmptyArray(
      Schema.Struct({ message: Schema.Struct({ content: Schema.NullOr(Schema.String) }) })
    ),
    usage: Schema.optional(Schema.Unknown)
  })
)
const decodeCompletion = Schema.decodeUnknownEither(Completion)

/** `/v1/chat/completions` under the base URL, whether or not the base already ends in /v1. */
export const chatCompletionsUrl = (base: URL): string =>
  /\/v1\/?$/.test(base.pathname)
    ? endpoint(base, "/chat/completions")
    : endpoint(base, "/v1/chat/completions")

export const makeOpenAiProvider = (settings: ProviderSettings) =>
  Effect.gen(function* () {
    const context = yield* Effect.context<HttpClient.HttpClient>()
    const definition: ProviderDefinition = {
      name: "openai",
      run: (task) =>
        Effect.gen(function* () {
          const payload = yield* decodePayload("openai", task.payload)
          const base = settings.openaiUrl
          if (base === undefined)
            return yield* new ProviderUnavailable({
              provider: "openai",
              reason: "no --openai-url is configured"
            })
          const outcome = yield* postJson(
            "openai",
            payload.model,
            chatCompletionsUrl(base),
            { model: payload.model, messages: [{ role: "user", content: payload.prompt }], stream: false },
            settings
          )
          const answer = decodeCompletion(outcome.text)
          const reported = Either.isRight(answer) ? answer.right.model : null
          const receipt = httpReceipt(
            "openai",
            payload.model,
            reported,
            outcome,
            Either.isRight(answer) ? answer.right.usage : null
          )
          if (outcome.status < 200 || outcome.status >= 300)
            return yield* statusFailure("openai", outcome, receipt)
          if (Either.isLeft(answer)) {
            return yield* new ProviderFailed({
              provider: "openai",
              reason: "the answer is not a chat completion",
              retryable: false,
              receipt
            })
          }
          if (answer.right.model !== payload.model) {
            return yield* new ModelMismatch({
              provider: "openai",
              requested: payload.model,
              reported: reportedModel(answer.right.model),
              receipt
            })
          }
          return {
            result: {
              provider: "openai",
              requested_model: payload.model,
              model: answer.right.model,
              model_evidence: receipt.model_evidence,
              text: answer.right.choices[0].message.content ?? ""
            },
            receipt
          }
        }).pipe(Effect.provide(context))
    }
    return definition
  })
