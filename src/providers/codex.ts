/**
 * Codex: `codex exec --json --model M -`, the prompt on stdin, in the work dir. Its stdout is
 * JSONL events. The turn decides the outcome (`turn.completed` with an agent message, or
 * `turn.failed`), never an `error` event on the way: Codex prints those for its own
 * reconnects and then often finishes normally. They are kept in the receipt as events.
 */
import { Effect, Option, Schema } from "effect"
import type { CliEvent } from "../domain/provider.js"
import { MaxDetailChars, truncate } from "../domain/provider.js"
import { makeCliLauncher, settleCliRun } from "./cli.js"
import type { ProviderDefinition } from "./registry.js"
import type { ProviderSettings } from "./settings.js"
import type { Classified, CliRun, CliVerdict } from "./verdict.js"
import { isTransientStatus, lineMatching, TransportFailure } from "./verdict.js"

/** The events RelayKeep reads (current `codex exec --json` and the older `msg` envelope). */
const Event = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("item.completed"),
    item: Schema.Struct({
      type: Schema.String,
      text: Schema.optional(Schema.String),
      message: Schema.optional(Schema.String)
    })
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
  /** The last agent message. */
  readonly message: string | undefined
  readonly usage: unknown
  /** How the last turn ended, if it did: `turn.completed` or `turn.failed` (and its error). */
  readonly turn:
    | { readonly _tag: "completed" }
    | { readonly _tag: "failed"; readonly error: string }
    | { readonly _tag: "none" }
  /** Codex's own notices and errors on the way: `error` events and error items. */
  readonly events: ReadonlyArray<CliEvent>
  /** A failure the older `msg` envelope reported (no turn events there). */
  readonly legacyFailure: string | undefined
  /** Lines that are not JSON at all. */
  readonly malformed: number
}

/** Read Codex's JSONL stdout: the final agent message, token counts, the turn, the notices. */
export const readCodexEvents = (stdout: string): CodexReading => {
  let message: string | undefined
  let usage: unknown = null
  let turn: CodexReading["turn"] = { _tag: "none" }
  let legacyFailure: string | undefined
  let malformed = 0
  const events: Array<CliEvent> = []
  for (const line of stdout.split("\n")) {
    if (line.trim() === "") continue
    const event = decodeEvent(line)
    if (Option.isNone(event)) {
      malformed++
      continue
    }
    const e = event.value
    if ("item" in e) {
      if (e.item.type === "agent_message" && e.item.text !== undefined) message = e.item.text
      else if (e.item.type === "error" && e.item.message !== undefined)
        events.push({ type: "item.error", message: e.item.message })
    } else if ("usage" in e && e.type === "turn.completed") {
      usage = e.usage ?? usage
      turn = { _tag: "completed" }
    } else if ("type" in e && e.type === "turn.failed") {
      turn = { _tag: "failed", error: ("error" in e ? e.error?.message : undefined) ?? "turn failed" }
    } else if ("message" in e && e.type === "error") events.push({ type: "error", message: e.message })
    else if ("msg" in e && e.msg.type === "agent_message" && e.msg.message !== undefined)
      message = e.msg.message
    else if ("msg" in e && e.msg.type === "token_count") usage = e.msg.info ?? usage
    else if ("msg" in e && e.msg.type === "error") legacyFailure = e.msg.message ?? "error"
    else if ("type" in e && e.type === "turn.completed") turn = { _tag: "completed" }
  }
  return { message, usage, turn, events, legacyFailure, malformed }
}

/** How the worker asks Codex to run: `--skip-git-repo-check` only when the user chose it. */
export interface CodexOptions {
  readonly skipGitCheck: boolean
}

export const codexArgs =
  (options: CodexOptions) =>
  (model: string): ReadonlyArray<string> => [
    "exec",
    "--json",
    "--model",
    model,
    ...(options.skipGitCheck ? ["--skip-git-repo-check"] : []),
    "-"
  ]

/**
 * Why a turn failed, from Codex's message: authentication, a missing variable and an unknown
 * model need the user; rate limits, overload, 5xx and dropped connections pass.
 */
export const classifyCodexError = (message: string): Classified => {
  const said = truncate(message, MaxDetailChars)
  // "last status: 429", "unexpected status 401 Unauthorized", "server error (503 Service Unavailable)".
  const status = /\b(?:status:?|status code)\s*(\d{3})\b|\((\d{3}) [A-Z][a-z]/i.exec(message)
  const code = status?.[1] ?? status?.[2]
  const missing = /Missing environment variable: `([^`]+)`/.exec(message)?.[1]
  if (missing !== undefined)
    return {
      reason: `its model provider needs the environment variable ${missing}: set it in the worker's environment (and keep it out of --strip-env)`,
      retryable: false
    }
  if (
    code === "401" ||
    code === "403" ||
    /Unauthorized|invalid_api_key|Incorrect API key|not logged in/i.test(message)
  )
    return {
      reason: `could not authenticate (${said}): run \`codex login\` as the worker's user, or fix the key of the model provider in its config.toml`,
      retryable: false
    }
  // Out of credit is a 429 too, but waiting does not refill it.
  if (/insufficient_quota|exceeded your current quota|usage limit/i.test(message))
    return {
      reason: `the account is out of quota (${said}): add credit or wait for the limit to reset`,
      retryable: false
    }
  if (
    code === "404" ||
    /model_not_found|model .* does not exist|unknown model|model is not supported/i.test(message)
  )
    return {
      reason: `the model was refused (${said}): check the payload's model, or the model provider's base_url`,
      retryable: false
    }
  if (
    (code !== undefined && isTransientStatus(Number(code))) ||
    /Too Many Requests|rate.?limit|high demand|overloaded/i.test(message) ||
    TransportFailure.test(message)
  )
    return { reason: `the model API failed (${said}); another attempt may succeed`, retryable: true }
  return { reason: `the turn failed: ${said}`, retryable: false }
}

/**
 * Errors Codex prints on stderr before any turn, which another attempt would meet again: each
 * is a setting of the worker's, named with the fix.
 */
export const classifyCodexStartup = (stderr: string, workDir: string): Classified | undefined => {
  if (/--skip-git-repo-check/.test(stderr) && /trusted directory|git repo/i.test(stderr))
    return {
      reason: `refuses to run outside a git repository, and the work dir ${workDir} is not in one: run \`git init\` there, or start the worker with --codex-skip-git-check (see SECURITY.md for what that gives up)`,
      retryable: false
    }
  const config = lineMatching(stderr, /config(uration)?\.toml|error loading config|invalid config/i)
  if (config !== undefined)
    return {
      reason: `could not load its configuration: ${truncate(config, MaxDetailChars)}`,
      retryable: false
    }
  const usage = lineMatching(stderr, /unexpected argument|unrecognized (option|subcommand)|Usage: codex/i)
  if (usage !== undefined)
    return {
      reason: `refused its command line (${truncate(usage, MaxDetailChars)}): this Codex release does not take the flags RelayKeep passes; see docs/providers.md for the tested versions`,
      retryable: false
    }
  const login = lineMatching(stderr, /not logged in|codex login|OPENAI_API_KEY/i)
  if (login !== undefined)
    return {
      reason: `is not logged in (${truncate(login, MaxDetailChars)}): run \`codex login\` as the worker's user`,
      retryable: false
    }
  return undefined
}

/** What a Codex run came to. */
export const judgeCodex = (run: CliRun, workDir: string): CliVerdict => {
  const reading = readCodexEvents(run.stdout)
  const accounting = { usage: reading.usage, costUsd: null, events: reading.events }
  const failed = (classified: Classified, detail?: string): CliVerdict => ({
    _tag: "Failed",
    ...accounting,
    ...classified,
    detail
  })
  switch (reading.turn._tag) {
    case "failed":
      return failed(classifyCodexError(reading.turn.error), reading.turn.error)
    case "completed":
      if (reading.message === undefined)
        return failed({ reason: "the turn completed without an agent message", retryable: false })
      return run.exitCode === 0
        ? { _tag: "Answered", ...accounting, text: reading.message }
        : failed({ reason: `exited with code ${run.exitCode} after its turn completed`, retryable: true })
    case "none":
      break
  }
  // No turn ended: an older Codex (the `msg` envelope), or one that stopped before its turn.
  if (reading.legacyFailure !== undefined)
    return failed(classifyCodexError(reading.legacyFailure), reading.legacyFailure)
  if (run.exitCode !== 0) {
    const startup = classifyCodexStartup(run.stderr, workDir)
    return startup !== undefined
      ? failed(startup)
      : failed({ reason: `exited with code ${run.exitCode} before its turn ended`, retryable: true })
  }
  if (reading.message !== undefined) return { _tag: "Answered", ...accounting, text: reading.message }
  return failed({
    reason:
      reading.malformed > 0 ? "the output is not Codex's JSON events" : "no agent message in the output",
    retryable: false
  })
}

export const makeCodexProvider = (settings: ProviderSettings) =>
  Effect.gen(function* () {
    const launch = yield* makeCliLauncher(
      "codex",
      settings.codexExecutable,
      codexArgs({ skipGitCheck: settings.codexSkipGitCheck }),
      settings,
      (stdout) => readCodexEvents(stdout).events
    )
    const definition: ProviderDefinition = {
      name: "codex",
      run: (task) =>
        Effect.gen(function* () {
          const { payload, run, workDir } = yield* launch(task)
          const verdict = judgeCodex(
            { exitCode: run.exitCode, stdout: new TextDecoder().decode(run.stdout), stderr: run.stderrEnd },
            workDir
          )
          return yield* settleCliRun("codex", payload.model, run, verdict)
        })
    }
    return definition
  })
