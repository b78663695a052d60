/**
 * Claude Code: `claude -p --output-format json --model M`, the prompt on stdin, in the work
 * dir. No permission, sandbox or approval flags are added: the CLI runs with its own settings.
 *
 * Claude reports a failed API call as a result with `is_error: true` (and, oddly, `subtype:
 * "success"`), the HTTP status in `api_error_status`, the API's error type in `api_error_type`
 * and `terminal_reason: "api_error"`. Those fields, then the result text, decide whether
 * another attempt could succeed.
 */
import { Effect, Either, Schema } from "effect"
import { MaxDetailChars, truncate } from "../domain/provider.js"
import type { ProviderDefinition } from "./registry.js"
import { makeCliLauncher, settleCliRun } from "./cli.js"
import type { ProviderSettings } from "./settings.js"
import type { Classified, CliRun, CliVerdict } from "./verdict.js"
import { isTransientStatus, lineMatching, TransportFailure } from "./verdict.js"

/** The fields of Claude's JSON result that RelayKeep reads; others are ignored. */
const ClaudeResult = Schema.parseJson(
  Schema.Struct({
    result: Schema.optional(Schema.String),
    is_error: Schema.Boolean,
    subtype: Schema.optional(Schema.String),
    terminal_reason: Schema.optional(Schema.NullOr(Schema.String)),
    api_error_status: Schema.optional(Schema.NullOr(Schema.Number)),
    api_error_type: Schema.optional(Schema.NullOr(Schema.String)),
    usage: Schema.optional(Schema.Unknown),
    modelUsage: Schema.optional(Schema.Unknown),
    total_cost_usd: Schema.optional(Schema.Number)
  })
)
type ClaudeResult = typeof ClaudeResult.Type
const decodeClaude = Schema.decodeUnknownEither(ClaudeResult)

export const claudeArgs = (model: string): ReadonlyArray<string> => [
  "-p",
  "--output-format",
  "json",
  "--model",
  model
]

/** With the provider's name in front (`claude: not logged in: …`), what the user must do. */
export const NotLoggedIn = "not logged in: run `claude` and log in as the worker's user"

/** Why a result with `is_error` failed. Never "(success)": the subtype says nothing here. */
export const classifyClaudeError = (answer: ClaudeResult): Classified => {
  const text = answer.result ?? ""
  const said = truncate(text === "" ? "no message" : text, MaxDetailChars)
  const status = answer.api_error_status ?? undefined
  const type = answer.api_error_type ?? undefined
  const api = [status, type].filter((part) => part !== undefined).join(" ")
  if (/not logged in/i.test(text)) return { reason: NotLoggedIn, retryable: false }
  if (status === 401 || status === 403 || type === "authentication_error" || type === "permission_error")
    return {
      reason: `the API refused its credentials (${api}: ${said}): log in with \`claude\` as the worker's user, or fix the API key in the worker's environment`,
      retryable: false
    }
  if (
    (status !== undefined && isTransientStatus(status)) ||
    type === "overloaded_error" ||
    type === "rate_limit_error" ||
    type === "api_error"
  )
    return { reason: `the API failed (${api}: ${said}); another attempt may succeed`, retryable: true }
  if (status !== undefined || type !== undefined)
    return { reason: `the API refused the request (${api}: ${said})`, retryable: false }
  // No status at all: the request never got an answer (a connection error, a timeout) after
  // Claude's own retries.
  if (answer.terminal_reason === "api_error" || TransportFailure.test(text))
    return { reason: `could not reach the API (${said}); another attempt may succeed`, retryable: true }
  const ended = answer.terminal_reason ?? (answer.subtype === "success" ? undefined : answer.subtype)
  return {
    reason: ended === undefined ? `reported an error: ${said}` : `stopped (${ended}): ${said}`,
    retryable: false
  }
}

/** A non-zero exit with no JSON result: stderr errors another attempt would meet again. */
export const classifyClaudeStartup = (stderr: string): Classified | undefined => {
  if (/not logged in|please run \/login/i.test(stderr)) return { reason: NotLoggedIn, retryable: false }
  const usage = lineMatching(stderr, /unknown option|error: option|unexpected argument|too many arguments/i)
  if (usage !== undefined)
    return {
      reason: `refused its command line (${truncate(usage, MaxDetailChars)}): this Claude Code release does not take the flags RelayKeep passes; see docs/providers.md for the tested versions`,
      retryable: false
    }
  const settings = lineMatching(stderr, /settings\.json|invalid settings|configuration error/i)
  if (settings !== undefined)
    return { reason: `could not load its settings: ${truncate(settings, MaxDetailChars)}`, retryable: false }
  return undefined
}

/** What a Claude run came to. */
export const judgeClaude = (run: CliRun): CliVerdict => {
  const decoded = decodeClaude(run.stdout.trim())
  if (Either.isLeft(decoded)) {
    const accounting = { usage: null, costUsd: null, events: [] }
    if (run.exitCode === 0)
      return {
        _tag: "Failed",
        ...accounting,
        reason: "the output is not Claude's JSON result",
        retryable: false
      }
    const startup = classifyClaudeStartup(run.stderr)
    return {
      _tag: "Failed",
      ...accounting,
      ...(startup ?? { reason: `exited with code ${run.exitCode} without a result`, retryable: true })
    }
  }
  const answer = decoded.right
  const accounting = {
    usage: answer.usage ?? null,
    costUsd: answer.total_cost_usd ?? null,
    modelUsage: answer.modelUsage,
    events: []
  }
  if (answer.is_error)
    return { _tag: "Failed", ...accounting, ...classifyClaudeError(answer), detail: answer.result }
  if (run.exitCode !== 0)
    return {
      _tag: "Failed",
      ...accounting,
      reason: `exited with code ${run.exitCode} after a result`,
      retryable: true,
      detail: answer.result
    }
  return { _tag: "Answered", ...accounting, text: answer.result ?? "" }
}

export const makeClaudeProvider = (settings: ProviderSettings) =>
  Effect.gen(function* () {
    const launch = yield* makeCliLauncher("claude", settings.claudeExecutable, claudeArgs, settings, () => [])
    const definition: ProviderDefinition = {
      name: "claude",
      run: (task) =>
        Effect.gen(function* () {
          const { payload, run } = yield* launch(task)
          const verdict = judgeClaude({
            exitCode: run.exitCode,
            stdout: new TextDecoder().decode(run.stdout),
            stderr: run.stderrEnd
          })
          return yield* settleCliRun("claude", payload.model, run, verdict)
        })
    }
    return definition
  })
