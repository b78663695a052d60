/**
 * One worker pass: reap orphans, then visit the tasks that are ready, oldest first, claim
 * each and run it to its end (`worker/attempt.ts`). What `relaykeep worker` without `--watch`
 * runs; the watching worker (`worker/watch.ts`) runs the same pieces concurrently.
 */
import { Effect, Either, Option, Schema } from "effect"
import type { StorageError } from "../domain/errors.js"
import { TaskId } from "../domain/ids.js"
import { InvalidRecordReport } from "../domain/Task.js"
import type { RetryPolicy } from "../domain/Task.js"
import { Host } from "../services/Host.js"
import type { Provider } from "../services/Provider.js"
import { TaskStore } from "../services/TaskStore.js"
import { DefaultCancelPollMillis, runAttempt } from "./attempt.js"
import { ReapedTask, reapSnapshot } from "./reap.js"

export const PassReport = Schema.Struct({
  /** Tasks this pass ran to an outcome. */
  dispatched: Schema.Array(TaskId),
  invalid_records: Schema.Array(InvalidRecordReport),
  /** Ready tasks this pass could not claim (another worker took them, or they were cancelled). */
  skipped: Schema.Array(TaskId),
  /** Running tasks of other workers that are alive. */
  unknown_running: Schema.Array(TaskId),
  /** Orphans this pass reaped. */
  reaped: Schema.Array(ReapedTask),
  /** Queued tasks waiting out a retry backoff, left for a later pass. */
  waiting: Schema.Int,
  worker_pid: Schema.Int
})
export type PassReport = typeof PassReport.Type

export interface PassOptions {
  readonly workerId: string
  /** Lease length; heartbeats extend it every third of it while a task runs. */
  readonly leaseMillis: number
  /** The retry policy stamped on what this worker claims (default: one attempt). */
  readonly retry?: RetryPolicy | undefined
  readonly cancelPollMillis?: number | undefined
}

export const DefaultLeaseMillis = 60_000

export const runPass = (
  options: PassOptions
): Effect.Effect<PassReport, StorageError, TaskStore | Provider | Host> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const host = yield* Host
    const snapshot = yield* store.live
    const reap = yield* reapSnapshot(snapshot)
    const invalid = [...reap.invalid_records]

    const dispatched: Array<TaskId> = []
    const skipped: Array<TaskId> = []
    for (const { task_id: taskId } of snapshot.ready) {
      const claimed = yield* store
        .claim(taskId, { workerId: options.workerId, leaseMillis: options.leaseMillis, retry: options.retry })
        .pipe(Effect.either)
      if (Either.isLeft(claimed)) {
        const error = claimed.left
        if (error._tag === "StorageError") return yield* error
        if (error._tag === "InvalidRecord") invalid.push({ file: error.file, reason: error.reason })
        skipped.push(taskId)
        continue
      }
      if (Option.isNone(claimed.right)) {
        skipped.push(taskId)
        continue
      }
      const report = yield* runAttempt(claimed.right.value, {
        leaseMillis: options.leaseMillis,
        cancelPollMillis: options.cancelPollMillis ?? DefaultCancelPollMillis
      })
      if (report.end._tag !== "stale") dispatched.push(taskId)
    }

    return {
      dispatched,
      invalid_records: invalid,
      skipped,
      unknown_running: reap.live,
      reaped: reap.reaped,
      waiting: snapshot.queued.length - snapshot.ready.length,
      worker_pid: host.pid
    }
  }).pipe(Effect.withSpan("Worker.pass"))
