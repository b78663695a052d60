/** What providers are asked and what they leave behind: payloads, receipts, bounded error text. */
import { Schema } from "effect"
import { Timestamp } from "./time.js"

/** Models a CLI may be asked for: no leading `-`, so a model can never become a flag. */
export const CliModel = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9._:/][A-Za-z0-9._:/-]{0,99}$/, {
    message: () => "must be 1-100 letters, digits, '.', '_', ':', '-' or '/', not starting with '-'"
  })
)

/** A payload for a real provider: exactly these three keys. */
export const ProviderPayload = Schema.Union(
  Schema.Struct({ provider: Schema.Literal("claude", "codex"), model: CliModel, prompt: Schema.String }),
  Schema.Struct({
    provider: Schema.Literal("ollama", "openai"),
    model: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)),
    prompt: Schema.String
  })
)
export type ProviderPayload = typeof ProviderPayload.Type
export type ProviderName = ProviderPayload["provider"]

/** The built-in provider that runs payloads naming none: it hands the payload back. */
export const EchoProviderName = "fake-echo"

/** The provider a payload asks for (what per-provider caps count); none means the echo. */
export const providerOfPayload = (payload: { readonly [key: string]: unknown }): string => {
  const requested = payload["provider"]
  return typeof requested === "string" ? requested : EchoProviderName
}

/** How much we know about which model answered. */
export const ModelEvidence = Schema.Struct({
  verified: Schema.Boolean,
  source: Schema.String,
  /** Claude's `modelUsage`, kept as observed (it may list helper models too). */
  model_usage: Schema.optional(Schema.Unknown)
})

/**
 * A notice or error a CLI reported on the way (Codex's `error` events, its reconnects among
 * them), kept as it said it, cut at MaxDetailChars. The outcome is decided elsewhere.
 */
export const CliEvent = Schema.Struct({
  type: Schema.String,
  message: Schema.String
})
export type CliEvent = typeof CliEvent.Type

/** At most this many events in a receipt: the first ones, then a count of what was left out. */
export const MaxReceiptEvents = 20

/** What one attempt of a provider did, appended to the task's attempt. Never estimated. */
export const AttemptReceipt = Schema.Struct({
  provider: Schema.String,
  requested_model: Schema.NullOr(Schema.String),
  model: Schema.NullOr(Schema.String),
  model_evidence: ModelEvidence,
  started_at: Timestamp,
  ended_at: Timestamp,
  duration_ms: Schema.Number,
  exit_code: Schema.NullOr(Schema.Int),
  http_status: Schema.NullOr(Schema.Int),
  usage: Schema.NullOr(Schema.Unknown),
  cost_usd: Schema.NullOr(Schema.Number),
  /** Of stdout (a CLI) or the body (a model server), as far as it got when the attempt ended. */
  output_sha256: Schema.NullOr(Schema.String),
  output_bytes: Schema.NullOr(Schema.Int),
  /** The CLI's own notices and errors on the way, when it reported any. */
  events: Schema.optional(Schema.Array(CliEvent)),
  /** How many more events there were than `events` keeps. */
  events_dropped: Schema.optional(Schema.Int)
})
export type AttemptReceipt = typeof AttemptReceipt.Type

export const Truncated = "[truncated]"
export const MaxMessageChars = 1000
export const MaxDetailChars = 300

/** At most `max` characters; a cut is marked, so a reader knows there was more. */
export const truncate = (text: string, max: number): string =>
  text.length <= max ? text : `${text.slice(0, max)} ${Truncated}`

/** The last `max` characters of a text (stderr keeps its end, where the error usually is). */
export const tail = (text: string, max: number): string =>
  text.length <= max ? text : `${Truncated} ${text.slice(text.length - max)}`
