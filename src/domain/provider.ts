/** What providers are asked and what they leave behind: payloads, receipts, bounded error text. */
import { Schema } from "effect"
import { Integer, JsonNumber, JsonValue } from "./fields.js"
import { Timestamp } from "./time.js"

/** Models a CLI may be asked for: no leading `-`, so a model can never become a flag. */
export const CliModel = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9._:/][A-Za-z0-9._:/-]{0,99}$/, {
    message: () => "must be 1-100 letters, digits, '.', '_', ':', '-' or '/', not starting with '-'"
  })
)

/**
 * A payload for a real provider: exactly these keys. A CLI's may name the directory it runs in
 * (`work_dir`), which a worker accepts only inside a directory it allows (`--allow-work-dir`).
 */
export const ProviderPayload = Schema.Union(
  Schema.Struct({
    provider: Schema.Literal("claude", "codex"),
    model: CliModel,
    prompt: Schema.String,
    work_dir: Schema.optional(Schema.String)
  }),
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
  verified: Schema.Boolean.annotations({
    description: "Whether the model was verified, not only reported by the provider"
  }),
  source: Schema.String.annotations({ description: "Where the model name came from, in words" }),
  /** Claude's `modelUsage`, kept as observed (it may list helper models too). */
  model_usage: Schema.optional(
    JsonValue.annotations({ description: "The provider's per-model usage, as it reported it" })
  )
}).annotations({ description: "How much is known about which model answered" })

const Nullable = "null when the provider did not say"

/**
 * A notice or error a CLI reported on the way (Codex's `error` events, its reconnects among
 * them), kept as it said it, cut at MaxDetailChars. The outcome is decided elsewhere.
 */
export const CliEvent = Schema.Struct({
  type: Schema.String.annotations({
    description: "The kind of event, as the CLI named it (error, item.error)"
  }),
  message: Schema.String.annotations({ description: "What the CLI said, cut at 300 characters" })
}).annotations({ description: "A notice or error the CLI reported on the way" })
export type CliEvent = typeof CliEvent.Type

/** At most this many events in a receipt: the first ones, then a count of what was left out. */
export const MaxReceiptEvents = 20

/** What one attempt of a provider did, appended to the task's attempt. Never estimated. */
export const AttemptReceipt = Schema.Struct({
  provider: Schema.String.annotations({ description: "The provider that ran the attempt" }),
  requested_model: Schema.NullOr(Schema.String).annotations({
    description: "The model the payload asked for; null when it named none"
  }),
  model: Schema.NullOr(Schema.String).annotations({
    description: `The model that answered, as reported; ${Nullable}`
  }),
  model_evidence: ModelEvidence,
  started_at: Timestamp.annotations({ description: "When the provider started (ISO-8601 UTC)" }),
  ended_at: Timestamp.annotations({ description: "When it ended (ISO-8601 UTC)" }),
  duration_ms: JsonNumber().annotations({ description: "How long it ran, in milliseconds" }),
  exit_code: Schema.NullOr(Integer()).annotations({
    description: "The CLI's exit code; null for an HTTP provider or a CLI that exited without one"
  }),
  http_status: Schema.NullOr(Integer()).annotations({
    description: "The HTTP status of an HTTP provider; null for a CLI"
  }),
  usage: Schema.NullOr(JsonValue).annotations({
    description: `Token usage as the provider reported it (any JSON value); ${Nullable}`
  }),
  cost_usd: Schema.NullOr(JsonNumber()).annotations({
    description: `The cost in US dollars as the provider reported it; ${Nullable}`
  }),
  output_sha256: Schema.NullOr(Schema.String).annotations({
    description:
      "The SHA-256 of the provider's raw output (stdout of a CLI, the body of a server) as far as it got, in hex; null when not recorded"
  }),
  output_bytes: Schema.NullOr(Integer({ minimum: 0 })).annotations({
    description:
      "The length of that output as far as it got (a stopped attempt keeps it too); null when not recorded"
  }),
  events: Schema.optional(
    Schema.Array(CliEvent).annotations({
      description: `The CLI's own notices and errors on the way (Codex's reconnects among them), at most ${MaxReceiptEvents}; they never decide the outcome`
    })
  ),
  events_dropped: Schema.optional(
    Integer({ minimum: 1 }).annotations({
      description: "How many more events there were than `events` keeps"
    })
  )
}).annotations({ description: "What the provider did in this attempt, never estimated" })
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

/** A model name as a provider reported it, in a receipt or an error: at most this long. */
export const MaxReportedModelChars = 200
/** A usage object (or Claude's modelUsage) as reported, in a receipt: at most this much JSON. */
export const MaxReportedJsonBytes = 8 * 1024

/** What a provider reported as a model name, cut (and marked) past MaxReportedModelChars. */
export const boundedModel = (model: string): string => truncate(model, MaxReportedModelChars)

/**
 * A model name quoted in a message, as JSON: cut like boundedModel, unless it is one already
 * (a name boundedModel cut is left as it is, its mark included).
 */
export const quotedModel = (model: string): string =>
  JSON.stringify(model.length <= MaxReportedModelChars + Truncated.length + 1 ? model : boundedModel(model))

/**
 * A JSON value a provider reported (usage, per-model usage), kept whole up to
 * MaxReportedJsonBytes; past that, only its size, so a runaway server cannot bloat the record.
 */
export const boundedJson = (value: unknown): unknown => {
  if (value === null || value === undefined) return value
  const json = JSON.stringify(value)
  const bytes = json === undefined ? 0 : Buffer.byteLength(json, "utf8")
  return bytes <= MaxReportedJsonBytes ? value : { truncated: true, json_bytes: bytes }
}
