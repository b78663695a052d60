/**
 * Calling a local model server: one non-streaming JSON POST to a loopback URL, with no proxy
 * (node:http reads no proxy variables) and no redirects followed (the client does not follow
 * them unless asked), the answer's size bounded, and the task timeout applied.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Clock, Duration, Effect, Option, Stream } from "effect"
import { sha256Hex } from "../domain/canonical.js"
import { OutputTooLarge, ProviderFailed, ProviderTimeout } from "../domain/errors.js"
import type { AttemptReceipt } from "../domain/provider.js"
import { boundedJson, boundedModel, MaxDetailChars, truncate } from "../domain/provider.js"
import { isoTime } from "../domain/time.js"
import { redactText } from "../domain/redactText.js"
import { stoppedReceipt, withReceipt } from "./receipts.js"
import type { ProviderSettings } from "./settings.js"

export interface HttpOutcome {
  readonly status: number
  readonly body: Uint8Array
  readonly text: string
  readonly startedAt: number
  readonly endedAt: number
}

class Overflow {
  readonly _tag = "Overflow"
}

export const postJson = (
  provider: string,
  requestedModel: string,
  url: string,
  body: unknown,
  settings: ProviderSettings
) =>
  Effect.flatMap(Clock.currentTimeMillis, (startedAt) =>
    Effect.gen(function* () {
      const client = yield* HttpClient.HttpClient
      const exchange = Effect.scoped(
        Effect.gen(function* () {
          const response = yield* client.execute(
            HttpClientRequest.post(url).pipe(HttpClientRequest.bodyUnsafeJson(body))
          )
          const chunks: Array<Uint8Array> = []
          let size = 0
          yield* response.stream.pipe(
            Stream.runForEach((chunk) => {
              size += chunk.length
              if (size > settings.maxOutputBytes) return Effect.fail(new Overflow())
              chunks.push(chunk)
              return Effect.void
            })
          )
          const bytes = new Uint8Array(size)
          let at = 0
          for (const chunk of chunks) {
            bytes.set(chunk, at)
            at += chunk.length
          }
          return { status: response.status, body: bytes }
        })
      )
      const answered = yield* exchange.pipe(
        Effect.timeoutOption(Duration.millis(settings.taskTimeoutMillis)),
        Effect.catchTag("Overflow", () =>
          Effect.fail(new OutputTooLarge({ provider, limitBytes: settings.maxOutputBytes }))
        ),
        Effect.mapError((error) =>
          error._tag === "OutputTooLarge"
            ? error
            : new ProviderFailed({
                provider,
                // The URL may carry user-info, and the error may quote the server: both are scrubbed.
                reason: redactText(`could not reach ${url}: ${error.message}`),
                retryable: true
              })
        )
      )
      if (Option.isNone(answered))
        return yield* new ProviderTimeout({ provider, millis: settings.taskTimeoutMillis })
      const outcome: HttpOutcome = {
        ...answered.value,
        text: new TextDecoder().decode(answered.value.body),
        startedAt,
        endedAt: yield* Clock.currentTimeMillis
      }
      return outcome
    }).pipe(
      // A call that got no answer still happened: its attempt keeps a receipt of what is known.
      Effect.catchAll((error) =>
        Effect.flatMap(Clock.currentTimeMillis, (endedAt) =>
          Effect.fail(
            withReceipt(
              error,
              stoppedReceipt(provider, requestedModel, startedAt, endedAt, "no answer from the server")
            )
          )
        )
      )
    )
  )

/**
 * A model name as a server reported it, fit to be stored and quoted: scrubbed by the text rules
 * of redaction (a server is untrusted, and its "model" may hold a URL with credentials or a
 * token), then cut at MaxReportedModelChars. Scrubbed first, so that a cut cannot leave the
 * start of a secret in a shape the rules no longer recognise.
 */
export const reportedModel = (model: string): string => boundedModel(redactText(model))

/** The receipt of an HTTP call; the model is what the server reported, which is not proof. */
export const httpReceipt = (
  provider: string,
  requestedModel: string,
  reported: string | null,
  outcome: HttpOutcome,
  usage: unknown
): AttemptReceipt => ({
  provider,
  requested_model: requestedModel,
  model: reported === null ? null : reportedModel(reported),
  model_evidence: {
    verified: false,
    source: "the model field of the server's response: reported by the server, not verified"
  },
  started_at: isoTime(outcome.startedAt),
  ended_at: isoTime(outcome.endedAt),
  duration_ms: outcome.endedAt - outcome.startedAt,
  exit_code: null,
  http_status: outcome.status,
  usage: boundedJson(usage ?? null),
  cost_usd: null,
  output_sha256: sha256Hex(outcome.body),
  output_bytes: outcome.body.length
})

/** A non-2xx answer: redirects are refused, 429 and 5xx may pass on a later attempt. */
export const statusFailure = (provider: string, outcome: HttpOutcome, receipt: AttemptReceipt) =>
  new ProviderFailed({
    provider,
    reason:
      outcome.status >= 300 && outcome.status < 400
        ? `HTTP ${outcome.status}: redirects are not followed`
        : `HTTP ${outcome.status}`,
    retryable: outcome.status === 429 || outcome.status >= 500,
    // The server's own words, untrusted: scrubbed before the cut, like a reported model.
    stdout_error: truncate(redactText(outcome.text.trim()), MaxDetailChars),
    receipt
  })
