/**
 * One worker pass: visit the queued tasks oldest first, claim each, run it through its
 * provider while heartbeating the lease, and record the outcome under the lease's fence.
 */
import { Clock, Duration, Effect, Either, Option, Schedule, Schema } from "effect"
import { ProviderFailed } from "../domain/errors.js"
import type { StorageError } from "../domain/errors.js"
import { TaskId } from "../domain/ids.js"
import { InvalidRecordReport } from "../domain/Task.js"
import type { Lease, TaskError } from "../domain/Task.js"
import { leaseStatus } from "../domain/transitions.js"
import { Host } from "../services/Host.js"
import { Provider } from "../services/Provider.js"
import type { ProviderError } from "../services/Provider.js"
import type { AttemptReceipt } from "../domain/provider.js"
import { MaxMessageChars, truncate } from "../domain/provider.js"
import { TaskStore } from "../services/TaskStore.js"

export const OrphanReport = Schema.Struct({
  task_id: TaskId,
  reason: Schema.Literal("lease_expired", "owner_dead", "owner_rebooted"),
  attempt: Schema.Int,
  worker_id: Schema.String,
  expires_at: Schema.String
})
export type OrphanReport = typeof OrphanReport.Type

export const PassReport = Schema.Struct({
  dispatched: Schema.Array(TaskId),
  invalid_records: Schema.Array(InvalidRecordReport),
  skipped: Schema.Array(TaskId),
  unknown_running: Schema.Array(TaskId),
  orphaned: Schema.Array(OrphanReport),
  worker_pid: Schema.Int
})
export type PassReport = typeof PassReport.Type

export interface PassOptions {
  readonly workerId: string
  /** Lease length; heartbeats extend it every third of it while a task runs. */
  readonly leaseMillis: number
}

export const DefaultLeaseMillis = 60_000

export const runPass = (
  options: PassOptions
): Effect.Effect<PassReport, StorageError, TaskStore | Provider | Host> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const provider = yield* Provider
    const host = yield* Host
    const snapshot = yield* store.live
    const now = yield* Clock.currentTimeMillis

    const invalid = [...snapshot.invalid]
    const unknownRunning: Array<TaskId> = []
    const orphaned: Array<OrphanReport> = []
    for (const record of snapshot.running) {
      const lease = record.lease
      if (lease === null) continue
      const alive = lease.host === host.hostname ? yield* host.isAlive(lease.pid) : true
      const status = leaseStatus(lease, now, { host: host.hostname, boot_id: host.bootId }, alive)
      if (status._tag === "live") unknownRunning.push(record.task_id)
      else
        orphaned.push({
          task_id: record.task_id,
          reason: status.reason,
          attempt: lease.attempt,
          worker_id: lease.worker_id,
          expires_at: lease.expires_at
        })
    }

    const dispatched: Array<TaskId> = []
    const skipped: Array<TaskId> = []
    for (const taskId of snapshot.queued) {
      const claimed = yield* store.claim(taskId, options).pipe(Effect.either)
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
      const { lease, record } = claimed.right.value
      const outcome = yield* provider.run({ taskId, attempt: lease.attempt, payload: record.payload }).pipe(
        // A bug in a provider fails its task; it must not leave the task running and stop the pass.
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
        keepLeaseAlive(store, taskId, lease, options.leaseMillis)
      )
      const saved = yield* Either.match(outcome, {
        onRight: (done) => store.complete(taskId, lease, done.result, done.receipt),
        onLeft: (error) => store.fail(taskId, lease, taskErrorOf(error), receiptOf(error))
      }).pipe(Effect.either)
      if (Either.isLeft(saved)) {
        const error = saved.left
        if (error._tag === "StorageError") return yield* error
        if (error._tag === "InvalidRecord") invalid.push({ file: error.file, reason: error.reason })
        yield* Effect.logWarning(
          `outcome of task ${taskId} attempt ${lease.attempt} not recorded: ${error.message}`
        )
        continue
      }
      dispatched.push(taskId)
    }

    return {
      dispatched,
      invalid_records: invalid,
      skipped,
      unknown_running: unknownRunning,
      orphaned,
      worker_pid: host.pid
    }
  }).pipe(Effect.withSpan("Worker.pass"))

/**
 * What a task keeps of a provider's failure: the tag and the message (cut at 1,000
 * characters), and the bounded stderr tail and stdout failure field the provider gave.
 */
export const taskErrorOf = (error: ProviderError): TaskError => ({
  tag: error._tag,
  message: truncate(error.message, MaxMessageChars),
  ...("stderr_tail" in error && error.stderr_tail !== undefined && error.stderr_tail !== ""
    ? { stderr_tail: error.stderr_tail }
    : {}),
  ...("stdout_error" in error && error.stdout_error !== undefined ? { stdout_error: error.stdout_error } : {})
})

const receiptOf = (error: ProviderError): AttemptReceipt | undefined =>
  "receipt" in error ? error.receipt : undefined

/** Run `work` while a background fiber extends the lease every third of its length. */
const keepLeaseAlive =
  (store: TaskStore["Type"], taskId: TaskId, lease: Lease, leaseMillis: number) =>
  <A, E, R>(work: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.scoped(
      Effect.gen(function* () {
        const every = Duration.millis(Math.max(leaseMillis / 3, 10))
        // A storage hiccup skips one beat (the lease has two more thirds to go); losing the
        // lease (StaleAttempt) or the record ends the beating.
        const beat = store.heartbeat(taskId, lease, leaseMillis).pipe(
          Effect.asVoid,
          Effect.catchTag("StorageError", (error) =>
            Effect.logWarning(`heartbeat of task ${taskId} failed: ${error.message}`)
          )
        )
        yield* beat.pipe(
          Effect.repeat(Schedule.spaced(every)),
          Effect.delay(every),
          Effect.catchAll((error) =>
            Effect.logWarning(`heartbeat of task ${taskId} stopped: ${error.message}`)
          ),
          Effect.forkScoped
        )
        return yield* work
      })
    )
