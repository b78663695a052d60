/**
 * Codex: `codex exec --json --model M -`, the prompt on stdin, in the work dir. Its stdout is
 * JSONL events; the answer is the last agent message, and token counts come when reported.
 */
import { Effect, Option, Schema } from "effect"
import { ProviderFailed } from "../domain/errors.js"
import { MaxDetailChars, truncate } from "../domain/provider.js"
import { cliReceipt, makeCliLauncher } from "./cli.js"
import type { ProviderDefinition } from "./registry.js"
import type { ProviderSettings } from "./settings.js"

/** The events RelayKeep reads (current `codex exec --json` and the older `msg` envelope). */
const Event = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("item.completed"),
    item: Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })
  }),
  Schema.Struct({ type: Schema.Literal("turn.completed"), usage: Schema.optional(Schema.Unknown) }),
  Schema.Struct({
    type: Schema.Literal("turn.failed"),
    error: Schema.optional(Schema.Struct({ message: Schema.String }))
  }),
  Schema.Struct({ type: Schema.Literal("error"), message: Schema.String }),
  Schema.Struct({
    msg: Schema.Struct({
      type: Schema.String,
      message: Schema.optional(Schema.String),
      info: Schema.optional(Schema.Unknown)
    })
  }),
  Schema.Struct({ type: Schema.String })
)
const decodeEvent = Schema.decodeUnknownOption(Schema.parseJson(Event))

export interface CodexReading {
  readonly message: string | undefined
  readonly usage: unknown
  readonly failure: string | undefined
  /** Lines that are not JSON at all. */
  readonly malformed: number
}

/** Read Codex's JSONL stdout: the final agent message, token counts, a reported failure. */
export const readCodexEvents = (stdout: string): CodexReading => {
  let message: string | undefined
  let usage: unknown = null
  let failure: string | undefined
  let malformed = 0
  for (const line of stdout.split("\n")) {
    if (line.trim() === "") continue
    const event = decodeEvent(line)
    if (Option.isNone(event)) {
      malformed++
      continue
    }
    const e = event.value
    if ("item" in e && e.item.type === "agent_message" && e.item.text !== undefined) message = e.item.text
    else if ("usage" in e && e.type === "turn.completed") usage = e.usage ?? usage
    else if ("error" in e && e.type === "turn.failed") failure = e.error?.message ?? "turn failed"
    else if ("message" in e && e.type === "error") failure = e.message
    else if ("msg" in e && e.msg.type === "agent_message" && e.msg.message !== undefined)
      message = e.msg.message
    else if ("msg" in e && e.msg.type === "token_count") usage = e.msg.info ?? usage
    else if ("msg" in e && e.msg.type === "error") failure = e.msg.message ?? "error"
  }
  return { message, usage, failure, malformed }
}

export const codexArgs = (model: string): ReadonlyArray<string> => ["exec", "--json", "--model", model, "-"]

export const makeCodexProvider = (settings: ProviderSettings) =>
  Effect.gen(function* () {
    const launch = yield* makeCliLauncher("codex", settings.codexExecutable, codexArgs, settings)
    const definition: ProviderDefinition = {
      name: "codex",
      run: (task) =>
        Effect.gen(function* () {
          const { payload, run } = yield* launch(task)
          const reading = readCodexEvents(new TextDecoder().decode(run.stdout))
          const receipt = cliReceipt("codex", payload.model, run, { usage: reading.usage, costUsd: null })
          const fail = (reason: string, retryable: boolean) =>
            new ProviderFailed({
              provider: "codex",
              reason,
              retryable,
              stderr_tail: run.stderrTail,
              ...(reading.failure === undefined
                ? {}
                : { stdout_error: truncate(reading.failure, MaxDetailChars) }),
              receipt
            })
          if (reading.failure !== undefined) return yield* fail("reported an error", false)
          if (reading.message === undefined) {
            return yield* run.exitCode === 0
              ? fail(
                  reading.malformed > 0
                    ? "the output is not Codex's JSON events"
                    : "no agent message in the output",
                  false
                )
              : fail(`exited with code ${run.exitCode} without a result`, true)
          }
          if (run.exitCode !== 0) return yield* fail(`exited with code ${run.exitCode}`, true)
          return {
            result: {
              provider: "codex",
              requested_model: payload.model,
              model: null,
              model_evidence: receipt.model_evidence,
              text: reading.message
            },
            receipt
          }
        })
    }
    return definition
  })
