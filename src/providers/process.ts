/**
 * Running a provider CLI within bounds: no shell, the prompt on stdin only, a time limit and
 * an output limit, and a stop that reaches the whole process tree. The child leads its own
 * process group and session (@effect/platform spawns it detached), and carries the attempt's
 * marker variables, so SIGTERM and then SIGKILL go to every process it started (see
 * services/ProcessTree), including grandchildren that ignore SIGTERM.
 */
import * as Command from "@effect/platform/Command"
import type { CommandExecutor } from "@effect/platform/CommandExecutor"
import { Clock, Duration, Effect, Exit, Option, Ref, Stream } from "effect"
import { OutputTooLarge, ProviderFailed, ProviderTimeout } from "../domain/errors.js"
import { MaxDetailChars, tail } from "../domain/provider.js"
import type { Host } from "../services/Host.js"
import { stopProcessTree } from "../services/ProcessTree.js"

export interface ProcessSpec {
  readonly provider: string
  readonly executable: string
  readonly args: ReadonlyArray<string>
  readonly cwd: string
  readonly env: Readonly<Record<string, string>>
  /**
   * Variables added to the child's environment that mark every process of this attempt: the
   * stop also reaches descendants that left the child's group and session but kept them.
   */
  readonly marker?: Readonly<Record<string, string>> | undefined
  readonly stdin: string
  readonly timeoutMillis: number
  readonly graceMillis: number
  readonly maxOutputBytes: number
  /** Told the child's process group once it runs (the worker records it for reapers). */
  readonly onSpawn?: ((pgid: number) => Effect.Effect<void>) | undefined
  /**
   * Told what the child had written when a run ends without an outcome (a timeout, an output
   * past the limit, a failure to read, an interrupt), once its processes are stopped: the
   * receipt of a stopped attempt keeps the hash and size of the output so far.
   */
  readonly onStopped?: ((soFar: OutputSoFar) => Effect.Effect<void>) | undefined
}

/** What a stopped child had written. */
export interface OutputSoFar {
  readonly stdout: Uint8Array
  readonly stderrEnd: string
  readonly startedAt: number
  readonly endedAt: number
}

export interface ProcessOutcome {
  readonly exitCode: number
  readonly stdout: Uint8Array
  /** The end of stderr, at most 300 characters, marked when cut. */
  readonly stderrTail: string
  /** The end of stderr as kept while the child ran (8 KiB): what adapters search for known errors. */
  readonly stderrEnd: string
  readonly startedAt: number
  readonly endedAt: number
}

/** Bytes of stderr kept while the child runs; only the end matters, so memory stays bounded. */
const StderrKeep = 8 * 1024

class Overflow {
  readonly _tag = "Overflow"
}

class Ended {
  readonly _tag = "Ended"
  constructor(readonly reason: string) {}
}

const keptBytes = (chunks: ReadonlyArray<Uint8Array>): number =>
  chunks.reduce((total, chunk) => total + chunk.length, 0)

const concat = (chunks: ReadonlyArray<Uint8Array>, size: number): Uint8Array => {
  const out = new Uint8Array(size)
  let at = 0
  for (const chunk of chunks) {
    out.set(chunk, at)
    at += chunk.length
  }
  return out
}

export const runBounded = (
  spec: ProcessSpec
): Effect.Effect<ProcessOutcome, ProviderFailed | ProviderTimeout | OutputTooLarge, CommandExecutor | Host> =>
  Effect.scoped(
    Effect.gen(function* () {
      const startedAt = yield* Clock.currentTimeMillis
      const command = Command.make(spec.executable, ...spec.args).pipe(
        Command.workingDirectory(spec.cwd),
        Command.env({ ...spec.env, ...spec.marker }, { extendEnv: false }),
        Command.feed(spec.stdin)
      )
      const child = yield* Command.start(command).pipe(
        Effect.mapError(
          (error) =>
            new ProviderFailed({
              provider: spec.provider,
              reason: `could not start ${spec.executable}: ${error.message}`,
              retryable: false
            })
        )
      )
      const pgid = child.pid
      const chunks: Array<Uint8Array> = []
      let size = 0
      const stderr = yield* Ref.make("")
      // Registered first, so it runs last: after the tree below is stopped.
      yield* Effect.addFinalizer((exit) =>
        Exit.isSuccess(exit) || spec.onStopped === undefined
          ? Effect.void
          : Effect.flatMap(Effect.zip(Ref.get(stderr), Clock.currentTimeMillis), ([stderrEnd, endedAt]) =>
              spec.onStopped === undefined
                ? Effect.void
                : spec.onStopped({ stdout: concat(chunks, keptBytes(chunks)), stderrEnd, startedAt, endedAt })
            )
      )
      const stop = () =>
        stopProcessTree({ leader: pgid, marker: spec.marker, leaderKnown: true }, spec.graceMillis)
      // However the attempt ends, interrupted included (a worker shutting down), the tree goes.
      yield* Effect.addFinalizer(stop)
      // Told in the background: the output must be read from the start, whatever that costs.
      if (spec.onSpawn !== undefined) yield* Effect.forkDaemon(spec.onSpawn(pgid))
      const stderrDone = yield* child.stderr.pipe(
        Stream.decodeText(),
        Stream.runForEach((text) => Ref.update(stderr, (kept) => (kept + text).slice(-StderrKeep))),
        Effect.ignore,
        Effect.fork
      )
      const stdout = child.stdout.pipe(
        Stream.mapError((error) => new Ended(`reading its output failed: ${error.message}`)),
        Stream.runForEach((chunk) => {
          size += chunk.length
          if (size > spec.maxOutputBytes) return Effect.fail(new Overflow())
          chunks.push(chunk)
          return Effect.void
        })
      )
      // The exit code fails when the child ended by a signal nobody here sent (the OOM killer, a
      // user's kill): that is a failed run, not an output overflow.
      const exited = child.exitCode.pipe(Effect.mapError((error) => new Ended(error.message)))
      const finished = yield* Effect.zip(stdout, exited, { concurrent: true }).pipe(
        Effect.timeoutOption(Duration.millis(spec.timeoutMillis)),
        Effect.either
      )
      // However it ended, nothing of the tree outlives the attempt.
      yield* stop()
      yield* Effect.timeoutOption(stderrDone.await, Duration.seconds(1))
      const stderrEnd = yield* Ref.get(stderr)
      const detail = { stderr_tail: tail(stderrEnd.trim(), MaxDetailChars) }
      if (finished._tag === "Left" && finished.left._tag === "Ended") {
        return yield* new ProviderFailed({
          provider: spec.provider,
          reason: `ended without an exit code (${finished.left.reason})`,
          retryable: true,
          ...detail
        })
      }
      if (finished._tag === "Left") {
        return yield* new OutputTooLarge({
          provider: spec.provider,
          limitBytes: spec.maxOutputBytes,
          ...detail
        })
      }
      if (Option.isNone(finished.right)) {
        return yield* new ProviderTimeout({ provider: spec.provider, millis: spec.timeoutMillis, ...detail })
      }
      const [, exitCode] = finished.right.value
      return {
        exitCode,
        stdout: concat(chunks, size),
        stderrTail: detail.stderr_tail,
        stderrEnd,
        startedAt,
        endedAt: yield* Clock.currentTimeMillis
      }
    })
  )
