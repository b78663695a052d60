/**
 * A watching worker's retention (`--retention 30d`): it collects finished tasks older than
 * that when it starts and then on a timer, and reports each collection as an event. Collecting
 * is housekeeping, like the worker registry: one that fails is reported and the worker goes on
 * running tasks, and tries again at the next.
 */
import { Cause, Clock, Effect, Schedule } from "effect"
import { isoTime } from "../domain/time.js"
import { TaskStore } from "../services/TaskStore.js"
import { WorkerOutput } from "../services/WorkerOutput.js"

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** At most an hour between collections. */
export const MaxCollectIntervalMillis = 3_600_000

/**
 * How often a worker with this retention collects: hourly, or every half of a shorter
 * retention (at least a second apart), so that a task is kept at most half as long again.
 */
export const collectIntervalMillis = (retentionMillis: number): number =>
  Math.min(MaxCollectIntervalMillis, Math.max(1_000, Math.floor(retentionMillis / 2)))

/** One collection of the tasks that finished more than `retentionMillis` ago, reported. */
export const collectOnce = Effect.fn("Worker.collect")(function* (retentionMillis: number) {
  const store = yield* TaskStore
  const output = yield* WorkerOutput
  const cutoff = (yield* Clock.currentTimeMillis) - retentionMillis
  yield* store.collect({ finishedBefore: cutoff }).pipe(
    Effect.flatMap((report) =>
      output.event({
        event: "collected",
        finished_before: isoTime(cutoff),
        removed: report.removed.length,
        damaged: report.invalid.length
      })
    ),
    // A defect too is reported, not left to end the timer in silence; an interruption stops it.
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause)
        ? Effect.failCause(cause)
        : output.event({ event: "collect_failed", message: messageOf(Cause.squash(cause)) })
    )
  )
})

/** Collect now, then every `collectIntervalMillis`, until interrupted (the watch's scope closes). */
export const collectOnTimer = (retentionMillis: number) =>
  collectOnce(retentionMillis).pipe(
    Effect.repeat(Schedule.spaced(collectIntervalMillis(retentionMillis))),
    Effect.asVoid
  )
