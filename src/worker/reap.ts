/**
 * Reaping: find running tasks whose worker is gone (its lease expired, its process on this
 * host no longer exists, or this host restarted) and end their attempt as `worker_lost`. Each
 * reap is fenced by the lease that was seen, so a task that completed or was heartbeated
 * meanwhile is left alone.
 */
import { Clock, Effect, Either, Schema } from "effect"
import type { StorageError } from "../domain/errors.js"
import { TaskId } from "../domain/ids.js"
import { InvalidRecordReport } from "../domain/Task.js"
import type { Lease, RecordHead } from "../domain/Task.js"
import { leaseStatus } from "../domain/transitions.js"
import type { LeaseStatus } from "../domain/transitions.js"
import { SettledAfterLoss } from "../domain/workerEvent.js"
import { Host } from "../services/Host.js"
import { attemptMarker, stopProcessTree } from "../services/ProcessTree.js"
import { TaskStore } from "../services/TaskStore.js"
import type { RunningSnapshot } from "../services/TaskStore.js"

export const ReapedTask = Schema.Struct({
  task_id: TaskId,
  reason: Schema.Literal("lease_expired", "owner_dead", "owner_rebooted"),
  attempt: Schema.Int,
  worker_id: Schema.String,
  expires_at: Schema.String,
  /** Where the task went: back to the queue, or failed/cancelled for good. */
  state: SettledAfterLoss,
  /**
   * The process group noted on the lost attempt, when processes of the attempt (its group, its
   * session, or processes carrying its id) still ran on this host and were stopped.
   */
  stopped_process_group: Schema.optional(Schema.Int)
})
export type ReapedTask = typeof ReapedTask.Type

export const ReapReport = Schema.Struct({
  reaped: Schema.Array(ReapedTask),
  /** Orphans that changed before the reaper could take them (completed, heartbeated). */
  left_alone: Schema.Array(TaskId),
  /** Running tasks whose workers are alive, as far as this host can tell. */
  live: Schema.Array(TaskId),
  invalid_records: Schema.Array(InvalidRecordReport)
})
export type ReapReport = typeof ReapReport.Type

/** How long a lost attempt's processes get between SIGTERM and SIGKILL. */
const LostProcessGraceMillis = 2_000

/**
 * Stop the processes a lost attempt started on this host, if they still run, and only those that
 * can be shown to be its own (a pid can be reused by an unrelated process): every process that
 * carries this task's id and attempt in its environment, the members of the groups and sessions
 * such carriers lead, and the members of the group and session noted on the attempt once a
 * carrier is seen among them. Returns the group noted on the attempt when anything was stopped.
 */
const stopLostProcesses = (taskId: TaskId, attempt: number, record: RecordHead) =>
  Effect.gen(function* () {
    const pgid = record.attempts.find((entry) => entry.attempt === attempt)?.process_group
    const stopped = yield* stopProcessTree(
      { leader: pgid, marker: attemptMarker(taskId, attempt), leaderKnown: false },
      LostProcessGraceMillis
    )
    if (stopped.length === 0) return undefined
    yield* Effect.logDebug(
      `stopped processes ${stopped.join(", ")} of the lost attempt ${attempt} of task ${taskId}`
    )
    return pgid
  })

/**
 * Whether the holder of `lease` may still be working at `now`: the process table is asked only
 * for a lease of this host. What every reaper asks (a worker's, and an MCP server's of the tasks
 * servers run themselves).
 */
export const holderStatus = (host: Host["Type"], lease: Lease, now: number): Effect.Effect<LeaseStatus> =>
  Effect.map(lease.host === host.hostname ? host.isAlive(lease.pid) : Effect.succeed(true), (alive) =>
    leaseStatus(lease, now, { host: host.hostname, boot_id: host.bootId }, alive)
  )

/** Reap the orphans among the running tasks of `snapshot`. */
export const reapSnapshot = (
  snapshot: RunningSnapshot
): Effect.Effect<ReapReport, StorageError, TaskStore | Host> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const host = yield* Host
    const now = yield* Clock.currentTimeMillis
    const reaped: Array<ReapedTask> = []
    const leftAlone: Array<TaskId> = []
    const live: Array<TaskId> = []
    const invalid: Array<InvalidRecordReport> = [...snapshot.invalid]
    for (const record of snapshot.running) {
      const lease = record.lease
      if (lease === null) continue
      const status = yield* holderStatus(host, lease, now)
      if (status._tag === "live") {
        live.push(record.task_id)
        continue
      }
      const outcome = yield* Effect.either(store.reap(record.task_id, lease, status.reason))
      if (Either.isRight(outcome)) {
        // Only once the reap stands: a lease renewed meanwhile keeps its processes.
        const stopped =
          lease.host === host.hostname
            ? yield* stopLostProcesses(record.task_id, lease.attempt, record)
            : undefined
        reaped.push({
          task_id: record.task_id,
          reason: status.reason,
          attempt: lease.attempt,
          worker_id: lease.worker_id,
          expires_at: lease.expires_at,
          state: outcome.right,
          ...(stopped === undefined ? {} : { stopped_process_group: stopped })
        })
        yield* Effect.logDebug(
          `reaped task ${record.task_id} attempt ${lease.attempt} (${status.reason}): now ${outcome.right}`
        )
        continue
      }
      const error = outcome.left
      if (error._tag === "StorageError") return yield* error
      if (error._tag === "InvalidRecord") invalid.push({ file: error.file, reason: error.reason })
      leftAlone.push(record.task_id)
    }
    return { reaped, left_alone: leftAlone, live, invalid_records: invalid }
  }).pipe(Effect.withSpan("Worker.reap"))

/**
 * Read the running tasks now and reap their orphans: what `relaykeep recover` and every worker
 * look run. It reads only running tasks, so its cost is bounded by the workers, not the backlog.
 */
export const reapOrphans: Effect.Effect<ReapReport, StorageError, TaskStore | Host> = Effect.flatMap(
  TaskStore,
  (store) => Effect.flatMap(store.running, reapSnapshot)
)
