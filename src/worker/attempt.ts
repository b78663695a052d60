/**
 * One attempt of one claimed task: run its provider while heartbeating the lease and watching
 * for a cancel request, then record the outcome under the lease's fence.
 *
 * However the attempt ends, the provider's processes are gone before anything is written:
 * a cancel stops them and records `cancelled`; a lost lease stops them (the task is someone
 * else's now); an interruption (a worker shutting down) stops them and gives the task back.
 *
 * Only the run itself can be interrupted. An interruption that comes earlier (while the
 * claim that produced the task was still being made, or before the run started) waits for
 * the run to begin and then gives the task back like any other, so a caller that claims and
 * runs inside one uninterruptible region never leaves a claimed task under its lease.
 */
import { Clock, Duration, Effect, Either, Exit, Fiber, Option, Ref, Schedule } from "effect"
import { ProviderFailed } from "../domain/errors.js"
import type { StaleAttempt, StorageError } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import type { AttemptReceipt } from "../domain/provider.js"
import { MaxMessageChars, providerOfPayload, truncate } from "../domain/provider.js"
import type { TaskError } from "../domain/Task.js"
import { Provider } from "../services/Provider.js"
import type { ProviderError, ProviderResult } from "../services/Provider.js"
import type { ClaimedTask, OutcomeError, SettledState } from "../services/TaskStore.js"
import { TaskStore } from "../services/TaskStore.js"
import { turnsUntil } from "../platform/eventLoop.js"

export interface AttemptOptions {
  /** Lease length; heartbeats extend it every third of it. */
  readonly leaseMillis: number
  /** How often the record is read for a cancel request. */
  readonly cancelPollMillis: number
  /** Told where a task released at shutdown went. */
  readonly onRelease?: ((state: "queued" | "failed" | "cancelled") => Effect.Effect<void>) | undefined
}

export const DefaultCancelPollMillis = 1_000

/**
 * How many turns of the event loop a provider that may have ended is given before the attempt
 * decides it had no result: a child's exit, the end of its output and the provider's reading of
 * it take a few turns, none of them waiting for anything.
 */
const ProviderSettleTurns = 8
/** How an attempt ended, as its worker saw it. */
export type AttemptEnd =
  | { readonly _tag: "complete" }
  /** `requeued`: the task went back to the queue for another attempt. */
  | { readonly _tag: "failed"; readonly error: TaskError; readonly requeued: boolean }
  | { readonly _tag: "cancelled" }
  /** The lease was taken over: the outcome was kept on the attempt as `late`, not as the result. */
  | { readonly _tag: "stale"; readonly reason: string }

export interface AttemptReport {
  readonly task_id: TaskId
  readonly attempt: number
  readonly provider: string
  readonly duration_ms: number
  readonly end: AttemptEnd
}

/**
 * Which provider failures another attempt could cure: a lost or stopped run, a timeout, an
 * HTTP 429/5xx, a CLI that exited non-zero without a result. Validation, configuration, a
 * model that answered with an error, or an output past the limit would fail the same way again.
 */
export const isRetryable = (error: ProviderError): boolean => {
  switch (error._tag) {
    case "ProviderFailed":
      return error.retryable
    case "ProviderTimeout":
      return true
    default:
      return false
  }
}

/**
 * What a task keeps of a provider's failure: the tag and the message (cut at 1,000
 * characters), whether it is retryable, and the bounded stderr tail and stdout failure field.
 */
export const taskErrorOf = (error: ProviderError): TaskError => ({
  tag: error._tag,
  message: truncate(error.message, MaxMessageChars),
  retryable: isRetryable(error),
  ...("stderr_tail" in error && error.stderr_tail !== undefined && error.stderr_tail !== ""
    ? { stderr_tail: error.stderr_tail }
    : {}),
  ...("stdout_error" in error && error.stdout_error !== undefined ? { stdout_error: error.stdout_error } : {})
})

const receiptOf = (error: ProviderError): AttemptReceipt | undefined =>
  "receipt" in error ? error.receipt : undefined

type Race =
  | { readonly _tag: "done"; readonly outcome: Either.Either<ProviderResult, ProviderError> }
  | { readonly _tag: "cancel" }
  | { readonly _tag: "lost"; readonly error: StaleAttempt }

/**
 * Run one claimed task to its end. Fails only with StorageError (the outcome could not be
 * written; the lease then expires and a reaper takes the task back).
 */
export const runAttempt = (
  claimed: ClaimedTask,
  options: AttemptOptions
): Effect.Effect<AttemptReport, StorageError, TaskStore | Provider> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const provider = yield* Provider
    const { lease, record } = claimed
    const taskId = record.task_id
    const startedAt = yield* Clock.currentTimeMillis

    // The provider's process group goes into the record, so that a reaper can stop it if this
    // worker dies; losing that note costs only that, so a failure to write it is logged.
    const onSpawn = (pgid: number) =>
      Effect.uninterruptible(store.recordProcess(taskId, lease, pgid)).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`process group of task ${taskId} not recorded: ${error.message}`)
        )
      )
    // What a cancelled run had done: its provider hands the receipt over as it stops.
    const stoppedReceipt = yield* Ref.make<AttemptReceipt | undefined>(undefined)
    const onStopped = (receipt: AttemptReceipt) => Ref.set(stoppedReceipt, receipt)
    const running = yield* provider
      .run({ taskId, attempt: lease.attempt, payload: record.payload, onSpawn, onStopped })
      .pipe(
        // The run is the part a shutdown or a cancel stops, whatever region started it.
        Effect.interruptible,
        // A bug in a provider fails its task; it must not leave the task running and stop the worker.
        Effect.catchAllDefect((defect) =>
          Effect.fail(
            new ProviderFailed({
              provider: "worker",
              reason: `provider crashed: ${String(defect)}`,
              retryable: false
            })
          )
        ),
        Effect.either,
        Effect.fork
      )

    // Heartbeats every third of the lease. A storage hiccup skips one beat (two thirds remain);
    // a StaleAttempt means the task is someone else's now.
    const every = Duration.millis(Math.max(options.leaseMillis / 3, 10))
    const heartbeats = store.heartbeat(taskId, lease, options.leaseMillis).pipe(
      Effect.map((beat) => beat.cancelRequested),
      Effect.catchTag("StorageError", (error) =>
        Effect.as(Effect.logWarning(`heartbeat of task ${taskId} failed: ${error.message}`), false)
      ),
      Effect.repeat({ schedule: Schedule.spaced(every), until: (cancelRequested) => cancelRequested }),
      Effect.delay(every),
      Effect.as<Race>({ _tag: "cancel" }),
      Effect.catchAll((error) =>
        error._tag === "StaleAttempt"
          ? Effect.succeed<Race>({ _tag: "lost", error })
          : Effect.zipRight(
              Effect.logWarning(`heartbeat of task ${taskId} stopped: ${error.message}`),
              Effect.never
            )
      )
    )
    // A cancel request is noticed within `cancelPollMillis` by reading the record (no lock, and
    // without its payload, which the attempt already holds).
    const cancelWatch = store.peek(taskId).pipe(
      Effect.map((head) => head.cancel_requested_at !== undefined),
      Effect.orElseSucceed(() => false),
      Effect.repeat({
        schedule: Schedule.spaced(Duration.millis(options.cancelPollMillis)),
        until: (requested) => requested
      }),
      Effect.as<Race>({ _tag: "cancel" })
    )
    const done = Effect.map(Fiber.join(running), (outcome): Race => ({ _tag: "done", outcome }))

    const ended = yield* Effect.raceAll([done, cancelWatch, heartbeats]).pipe(
      Effect.interruptible,
      // Shutting down: stop the provider's processes first, then give the task back. Installed
      // outside the interruptible race, so an interruption that was waiting for it lands here.
      Effect.onInterrupt(() =>
        Fiber.interrupt(running).pipe(
          Effect.zipRight(store.release(taskId, lease)),
          Effect.tap((state) => options.onRelease?.(state) ?? Effect.void),
          Effect.catchAll((error) => Effect.logWarning(`task ${taskId} not released: ${error.message}`))
        )
      )
    )
    // A result that is already there is recorded even when the lease was lost (as `late`). "There"
    // includes a provider that exited while this worker was paused, whose exit and output the
    // event loop has not delivered yet: the race can end without the loop turning once.
    if (ended._tag !== "done")
      yield* turnsUntil(Effect.map(Fiber.poll(running), Option.isSome), ProviderSettleTurns)
    const finished: Either.Either<ProviderResult, ProviderError> | undefined =
      ended._tag === "done"
        ? ended.outcome
        : yield* Effect.map(Fiber.poll(running), (polled) =>
            Option.isSome(polled) && Exit.isSuccess(polled.value) ? polled.value.value : undefined
          )
    // Whatever won, the provider's process group is stopped before anything is written.
    yield* Fiber.interrupt(running)

    const fenced = (
      effect: Effect.Effect<SettledState, OutcomeError>,
      end: (state: SettledState) => AttemptEnd
    ) =>
      effect.pipe(
        Effect.map(end),
        Effect.catchAll((error) =>
          error._tag === "StorageError"
            ? Effect.fail(error)
            : Effect.as(
                Effect.logWarning(
                  `outcome of task ${taskId} attempt ${lease.attempt} not recorded: ${error.message}`
                ),
                { _tag: "stale" as const, reason: error.message }
              )
        )
      )
    // A cancel that won the race against a run that had just ended keeps that run's receipt.
    const cancelledReceipt =
      (yield* Ref.get(stoppedReceipt)) ??
      (finished === undefined
        ? undefined
        : Either.match(finished, { onLeft: receiptOf, onRight: (result) => result.receipt }))
    const write = (): Effect.Effect<AttemptEnd, StorageError> => {
      if (ended._tag === "cancel")
        return fenced(store.stopCancelled(taskId, lease, cancelledReceipt), () => ({ _tag: "cancelled" }))
      if (finished === undefined)
        return Effect.succeed({
          _tag: "stale",
          reason: ended._tag === "lost" ? ended.error.reason : "no outcome"
        })
      return Either.match(finished, {
        onRight: (result) =>
          fenced(store.complete(taskId, lease, result.result, result.receipt), () => ({ _tag: "complete" })),
        onLeft: (error) => {
          const taskError = taskErrorOf(error)
          return fenced(store.fail(taskId, lease, taskError, receiptOf(error)), (state) => ({
            _tag: "failed",
            error: taskError,
            requeued: state === "queued"
          }))
        }
      })
    }
    // Once the provider is stopped, the outcome is written whole even if a shutdown comes now.
    const end = yield* write()
    return {
      task_id: taskId,
      attempt: lease.attempt,
      provider: providerOfPayload(record.payload),
      duration_ms: (yield* Clock.currentTimeMillis) - startedAt,
      end
    }
  }).pipe(Effect.uninterruptible, Effect.withSpan("Worker.attempt"))
