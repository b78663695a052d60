/**
 * One worker pass: reap orphans, then claim the oldest ready task and run it to its end
 * (`worker/attempt.ts`), and again, until no ready task is left or `limit` tasks were claimed.
 * What `relaykeep worker` without `--watch` runs; the watching worker (`worker/watch.ts`) runs
 * the same pieces concurrently.
 *
 * Claims come one at a time from `TaskStore.claimNext`, so a pass never reads the queue: each
 * claim costs what the store pays for one task, whatever the backlog, and a task waits in the
 * queue (where another worker may take it) rather than under a lease of this pass while earlier
 * tasks run.
 */
import { Effect, Schema } from "effect"
import type { StorageError } from "../domain/errors.js"
import { TaskId } from "../domain/ids.js"
import { InvalidRecordReport } from "../domain/Task.js"
import type { RetryPolicy } from "../domain/Task.js"
import { Host } from "../services/Host.js"
import type { Provider } from "../services/Provider.js"
import { TaskStore } from "../services/TaskStore.js"
import { DefaultCancelPollMillis, runAttempt } from "./attempt.js"
import { ReapedTask, reapOrphans } from "./reap.js"
import { withoutInServerTasks } from "./slots.js"

export const PassReport = Schema.Struct({
  /** Tasks this pass ran to an outcome, in the order it claimed them. */
  dispatched: Schema.Array(TaskId),
  /** Claimed tasks whose attempt lost its lease before it could record an outcome. */
  lost: Schema.Array(TaskId),
  invalid_records: Schema.Array(InvalidRecordReport),
  /** Running tasks of other workers that are alive. */
  unknown_running: Schema.Array(TaskId),
  /** Orphans this pass reaped. */
  reaped: Schema.Array(ReapedTask),
  /**
   * Queued tasks waiting out a retry backoff, left for a later pass: all of them when the pass
   * ran out of ready tasks, those its last claim met when it stopped at its limit.
   */
  waiting: Schema.Int,
  /** True when the pass stopped at its limit: ready tasks may be left. */
  limit_reached: Schema.Boolean,
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
  /** Claim at most this many tasks (`--limit`); no bound when absent. */
  readonly limit?: number | undefined
}

export const DefaultLeaseMillis = 60_000

export const runPass = (
  options: PassOptions
): Effect.Effect<PassReport, StorageError, TaskStore | Provider | Host> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const host = yield* Host
    const reap = yield* reapOrphans
    const invalid = [...reap.invalid_records]
    const seen = new Set(invalid.map((report) => report.file))
    const dispatched: Array<TaskId> = []
    const lost: Array<TaskId> = []
    const limit = options.limit ?? Infinity
    let waiting = 0

    /**
     * The next claim and its attempt, as one step that cannot be stopped between the two: an
     * interruption (Ctrl-C) meanwhile waits for the attempt's run, which then gives the task
     * back (attempt.ts), instead of leaving it under this pass's lease until a reaper comes.
     */
    const claimAndRun = Effect.gen(function* () {
      const batch = yield* store.claimNext({
        workerId: options.workerId,
        leaseMillis: options.leaseMillis,
        retry: options.retry,
        limit: 1,
        room: withoutInServerTasks(new Map())
      })
      const claimed = batch.claimed[0]
      const report =
        claimed === undefined
          ? undefined
          : yield* runAttempt(claimed, {
              leaseMillis: options.leaseMillis,
              cancelPollMillis: options.cancelPollMillis ?? DefaultCancelPollMillis
            })
      return { batch, report }
    }).pipe(Effect.uninterruptible)

    let claims = 0
    while (claims < limit) {
      const { batch, report } = yield* claimAndRun
      // A damaged record stays in the queue and is met again by the next claim: report it once.
      for (const report of batch.invalid) {
        if (seen.has(report.file)) continue
        seen.add(report.file)
        invalid.push(report)
      }
      waiting = batch.waiting
      if (report === undefined) break
      claims += 1
      if (report.end._tag === "stale") lost.push(report.task_id)
      else dispatched.push(report.task_id)
    }

    return {
      dispatched,
      lost,
      invalid_records: invalid,
      unknown_running: reap.live,
      reaped: reap.reaped,
      waiting,
      limit_reached: claims >= limit,
      worker_pid: host.pid
    }
  }).pipe(Effect.withSpan("Worker.pass"))
