/**
 * What a watching worker tells its operator, on stderr: one JSON object per event
 * (`--log-format json`, for log shippers), one readable line per event (`text`), or on a
 * terminal the same lines under a live status line (running, queued, finished, failed).
 */
import { Clock, Effect, FiberRef, HashSet, Layer, Logger, Option, Ref } from "effect"
import { nonEmptyEnv } from "../platform/env.js"
import type { WorkerEvent, WorkerStatus } from "../services/WorkerOutput.js"
import { WorkerOutput } from "../services/WorkerOutput.js"

export type { WorkerEvent, WorkerStatus } from "../services/WorkerOutput.js"

export type LogFormat = "json" | "text" | "tty"

/** One event as a readable line. */
export const describeEvent = (event: WorkerEvent): string => {
  switch (event.event) {
    case "started":
      return `worker ${event.worker_id} (pid ${event.pid}) watching: concurrency ${event.concurrency}, max attempts ${event.max_attempts}${Object.entries(
        event.max_per_provider
      )
        .map(([name, cap]) => `, ${name} ≤ ${cap}`)
        .join("")}`
    case "claimed":
      return `claimed ${event.task_id} attempt ${event.attempt} (${event.provider})`
    case "finished":
      return `${event.outcome} ${event.task_id} attempt ${event.attempt} in ${event.duration_ms} ms${
        event.error ? `: ${event.error.tag}: ${event.error.message}` : ""
      }${event.requeued ? " (queued again)" : ""}`
    case "reaped":
      return `reaped ${event.task_id} attempt ${event.attempt} (${event.reason}): now ${event.state}`
    case "released":
      return `released ${event.task_id} attempt ${event.attempt}: now ${event.state}`
    case "stopping":
      return `stopping (${event.reason}): ${event.running} running, up to ${event.grace_ms} ms to finish`
    case "storage_error":
      return `storage error, no more claims: ${event.message}`
    case "heartbeat_failed":
      return `heartbeat not recorded in the worker registry (still working): ${event.message}`
    case "heartbeat_restored":
      return "heartbeat recorded again"
    case "collected":
      return `collected ${event.removed} finished task${event.removed === 1 ? "" : "s"} that finished before ${event.finished_before}${
        event.damaged === 0 ? "" : `; kept ${event.damaged} damaged (relaykeep check)`
      }`
    case "collect_failed":
      return `collection of finished tasks failed (still working): ${event.message}`
    case "log":
      return `${event.level.toLowerCase()}: ${event.message}`
    case "stopped":
      return `stopped (${event.reason}): ${event.finished} finished, ${event.failed} failed, ${event.released} released`
  }
}

export const describeStatus = (status: WorkerStatus): string =>
  `running ${status.running}${status.queued === undefined ? "" : ` · queued ${status.queued}`} · finished ${status.finished} · failed ${status.failed}`

/** Erase the terminal's current line and return to its start. */
const ClearLine = "\r\u001b[2K"

/** Everything goes through `write` (stderr in the CLI; a buffer in tests). */
export const makeWorkerOutput = (format: LogFormat, write: (text: string) => Effect.Effect<void>) =>
  Effect.gen(function* () {
    const shown = yield* Ref.make("")
    return WorkerOutput.of({
      event: (event) =>
        Effect.gen(function* () {
          const now = new Date(yield* Clock.currentTimeMillis).toISOString()
          if (format === "json") return yield* write(`${JSON.stringify({ time: now, ...event })}\n`)
          const line = `${now} ${describeEvent(event)}\n`
          if (format === "text") return yield* write(line)
          // On a terminal the event goes above the status line, which is drawn again below it
          // (except after the last event: the shell's prompt comes next).
          if (event.event === "stopped") yield* Ref.set(shown, "")
          yield* write(`${ClearLine}${line}${yield* Ref.get(shown)}`)
        }),
      status: (status) =>
        format === "tty"
          ? Effect.gen(function* () {
              const text = describeStatus(status)
              if ((yield* Ref.getAndSet(shown, text)) !== text) yield* write(`${ClearLine}${text}`)
            })
          : Effect.void
    })
  })

export const workerOutputLayer = (
  format: LogFormat,
  write: (text: string) => Effect.Effect<void>
): Layer.Layer<WorkerOutput> => Layer.effect(WorkerOutput, makeWorkerOutput(format, write))

/**
 * With `--log-format json` every line on stderr is one JSON object: what the program logs
 * (warnings of a heartbeat or an outcome not written) goes out as `log` events too.
 */
export const jsonLogs = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(
    effect,
    FiberRef.currentLoggers,
    HashSet.make(
      Logger.make(({ date, logLevel, message }) => {
        const parts: ReadonlyArray<unknown> = Array.isArray(message) ? message : [message]
        const event: WorkerEvent = {
          event: "log",
          level: logLevel.label,
          message: parts.map((part) => (typeof part === "string" ? part : JSON.stringify(part))).join(" ")
        }
        process.stderr.write(`${JSON.stringify({ time: date.toISOString(), ...event })}\n`)
      })
    )
  )

/**
 * How `--log-format` writes: `auto` redraws a status line (an escape code) only on a terminal
 * and without NO_COLOR (https://no-color.org: any non-empty value); plain lines otherwise.
 */
export const outputFormat = (
  format: "auto" | "json" | "text",
  isTerminal: boolean,
  noColor: string | undefined
): LogFormat => (format !== "auto" ? format : isTerminal && (noColor ?? "") === "" ? "tty" : "text")

/**
 * stderr, as JSON when asked, with the status line when stderr is a terminal. NO_COLOR is read
 * through Effect's Config, as the help's colour is (src/cli/runCommand.ts).
 */
export const workerOutputStderrLayer = (format: "auto" | "json" | "text"): Layer.Layer<WorkerOutput> =>
  Layer.unwrapEffect(
    Effect.map(nonEmptyEnv("NO_COLOR"), (noColor) =>
      workerOutputLayer(
        outputFormat(format, process.stderr.isTTY === true, Option.getOrUndefined(noColor)),
        (text) => Effect.sync(() => void process.stderr.write(text))
      )
    )
  )
