/**
 * What the two coding-agent CLIs share: checking the worker's paths before anything starts,
 * building the child's environment, and the receipt of a run.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { CommandExecutor } from "@effect/platform/CommandExecutor"
import { Clock, Effect, Ref } from "effect"
import { sha256Hex } from "../domain/canonical.js"
import { ProviderFailed, ProviderUnavailable } from "../domain/errors.js"
import type { AttemptReceipt, CliEvent } from "../domain/provider.js"
import { boundedJson, MaxDetailChars, truncate } from "../domain/provider.js"
import { isoTime } from "../domain/time.js"
import type { ProviderPayload } from "../domain/provider.js"
import type { ProviderResult, ProviderTask } from "../services/Provider.js"
import { Host } from "../services/Host.js"
import { attemptMarker } from "../services/ProcessTree.js"
import { decodePayload, payloadWorkDir } from "./payload.js"
import type { OutputSoFar, ProcessOutcome } from "./process.js"
import { runBounded } from "./process.js"
import { stoppedReceipt, withReceipt } from "./receipts.js"
import type { ProviderSettings } from "./settings.js"
import type { CliVerdict } from "./verdict.js"
import { providerEnvironment } from "./environment.js"
import { boundedEvents } from "./verdict.js"
import { taskDirectory } from "./workDir.js"

const isAbsolute = (path: string) => path.startsWith("/")

/** A CLI's executable: configured, absolute, an existing executable file. */
export const checkExecutable = (
  fs: FileSystem.FileSystem,
  provider: string,
  executable: string | undefined
) =>
  Effect.gen(function* () {
    const unavailable = (reason: string) => new ProviderUnavailable({ provider, reason })
    if (executable === undefined) return yield* unavailable(`no --${provider}-executable is configured`)
    if (!isAbsolute(executable))
      return yield* unavailable(`--${provider}-executable must be an absolute path`)
    const exe = yield* fs
      .stat(executable)
      .pipe(Effect.mapError(() => unavailable(`${executable} does not exist`)))
    if (exe.type !== "File" || (exe.mode & 0o111) === 0)
      return yield* unavailable(`${executable} is not an executable file`)
    return executable
  })

/** The worker's environment as a provider may see it (see environment.ts). */
export const childEnvironment = (
  environment: Readonly<Record<string, string>>,
  settings: ProviderSettings
): Record<string, string> =>
  providerEnvironment(environment, { strip: settings.stripEnv, pass: settings.passEnv })

const NoModelIdentity = (provider: string) => `the ${provider} CLI does not report which model answered`

/** The receipt of a CLI run: no model identity (the CLIs do not report which model answered). */
export const cliReceipt = (
  provider: string,
  requestedModel: string,
  run: {
    readonly exitCode: number | null
    readonly stdout: Uint8Array
    readonly startedAt: number
    readonly endedAt: number
  },
  accounting: {
    readonly usage: unknown
    readonly costUsd: number | null
    readonly modelUsage?: unknown
    readonly events: ReadonlyArray<CliEvent>
  }
): AttemptReceipt => ({
  provider,
  requested_model: requestedModel,
  model: null,
  model_evidence: {
    verified: false,
    source: NoModelIdentity(provider),
    ...(accounting.modelUsage === undefined ? {} : { model_usage: boundedJson(accounting.modelUsage) })
  },
  started_at: isoTime(run.startedAt),
  ended_at: isoTime(run.endedAt),
  duration_ms: run.endedAt - run.startedAt,
  exit_code: run.exitCode,
  http_status: null,
  usage: boundedJson(accounting.usage ?? null),
  cost_usd: accounting.costUsd,
  output_sha256: sha256Hex(run.stdout),
  output_bytes: run.stdout.length,
  ...boundedEvents(accounting.events)
})

/**
 * A judged run as the worker records it: the answer as the task's result, or a ProviderFailed
 * with the verdict's reason, the end of stderr and what the CLI said, each with the receipt.
 */
export const settleCliRun = (
  provider: "claude" | "codex",
  requestedModel: string,
  run: ProcessOutcome,
  verdict: CliVerdict
): Effect.Effect<ProviderResult, ProviderFailed> => {
  const receipt = cliReceipt(provider, requestedModel, run, verdict)
  if (verdict._tag === "Failed")
    return Effect.fail(
      new ProviderFailed({
        provider,
        reason: verdict.reason,
        retryable: verdict.retryable,
        stderr_tail: run.stderrTail,
        ...(verdict.detail === undefined ? {} : { stdout_error: truncate(verdict.detail, MaxDetailChars) }),
        receipt
      })
    )
  return Effect.succeed({
    result: {
      provider,
      requested_model: requestedModel,
      model: null,
      model_evidence: receipt.model_evidence,
      text: verdict.text
    },
    receipt
  })
}

/**
 * Everything before a CLI's output is read, shared by Claude and Codex: decode the payload,
 * check the worker's paths, and run the executable within the worker's limits. Nothing is
 * started when the payload or the paths are wrong. A run stopped before its end (a timeout,
 * an output past the limit, a cancel or a shutdown) still leaves a receipt: the hash and size
 * of the output so far and the CLI's own events in it (`eventsOf`); an interrupted run hands
 * it to the task's `onStopped`, since an interrupted attempt fails with nothing.
 */
export const makeCliLauncher = (
  provider: "claude" | "codex",
  executable: string | undefined,
  argsFor: (model: string) => ReadonlyArray<string>,
  settings: ProviderSettings,
  eventsOf: (stdout: string) => ReadonlyArray<CliEvent>
) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const host = yield* Host
    const context = yield* Effect.context<CommandExecutor | Host>()
    return (task: ProviderTask) =>
      Effect.gen(function* () {
        const payload: ProviderPayload = yield* decodePayload(provider, task.payload)
        const executablePath = yield* checkExecutable(fs, provider, executable)
        const dir = yield* taskDirectory(fs, provider, settings, payloadWorkDir(payload))
        const startedAt = yield* Clock.currentTimeMillis
        const stopped = yield* Ref.make<AttemptReceipt | undefined>(undefined)
        const receiptSoFar = (soFar: OutputSoFar): AttemptReceipt =>
          cliReceipt(
            provider,
            payload.model,
            { ...soFar, exitCode: null },
            {
              usage: null,
              costUsd: null,
              events: eventsOf(new TextDecoder().decode(soFar.stdout))
            }
          )
        const run = yield* runBounded({
          provider,
          executable: executablePath,
          args: argsFor(payload.model),
          cwd: dir.cwd,
          env: childEnvironment(host.environment, settings),
          // The child learns which task and attempt it serves (ids we made, never user text), and
          // so does every descendant that keeps its environment: the stop finds them by it.
          marker: attemptMarker(task.taskId, task.attempt),
          stdin: payload.prompt,
          timeoutMillis: settings.taskTimeoutMillis,
          graceMillis: settings.killGraceMillis,
          maxOutputBytes: settings.maxOutputBytes,
          onSpawn: task.onSpawn,
          onStopped: (soFar) => Ref.set(stopped, receiptSoFar(soFar))
        }).pipe(
          Effect.onInterrupt(() =>
            Effect.flatMap(Ref.get(stopped), (receipt) =>
              receipt === undefined || task.onStopped === undefined ? Effect.void : task.onStopped(receipt)
            )
          ),
          // A run that was stopped still started: its attempt keeps a receipt of what is known.
          Effect.catchAll((error) =>
            Effect.flatMap(Effect.zip(Ref.get(stopped), Clock.currentTimeMillis), ([receipt, endedAt]) =>
              Effect.fail(
                withReceipt(
                  error,
                  receipt ??
                    stoppedReceipt(provider, payload.model, startedAt, endedAt, NoModelIdentity(provider))
                )
              )
            )
          )
        )
        return { payload, run, workDir: dir.path }
        // The scope holds a payload's work dir open until the CLI has started in it.
      }).pipe(Effect.scoped, Effect.provide(context))
  })
