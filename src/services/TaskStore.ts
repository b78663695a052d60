import { Context } from "effect"
import type { Effect, Option, Stream } from "effect"
import type {
  ConflictError,
  HashMismatch,
  InvalidInput,
  InvalidRecord,
  StaleAttempt,
  StorageError,
  UnknownTask
} from "../domain/errors.js"
import type { ClientRequestId, TaskId } from "../domain/ids.js"
import type { AttemptReceipt } from "../domain/provider.js"
import type { CollectedTask, CollectRequest } from "../domain/retention.js"
import type { OrphanReason } from "../domain/transitions.js"
import type { WorkerPresence } from "../domain/worker.js"
import type {
  CancelOutcome,
  InvalidRecordReport,
  JsonObject,
  Lease,
  Receipt,
  RecordHead,
  RetryPolicy,
  TaskError,
  TaskRecord,
  TaskState,
  TaskSummary,
  TaskView
} from "../domain/Task.js"

export interface SubmitRequest {
  readonly clientRequestId: ClientRequestId
  readonly payload: JsonObject
  /**
   * How long the finished task should be kept, in milliseconds; null for no limit (an MCP
   * task's `ttl`). Kept in the record as the first submission gave it; a resubmission's is
   * ignored, like everything else of it but the payload.
   */
  readonly ttlMillis?: number | null | undefined
}

export interface ClaimRequest {
  /** Names the worker in the lease and the attempt history. */
  readonly workerId: string
  /** How long the lease lasts before a heartbeat must extend it. */
  readonly leaseMillis: number
  /** The worker's retry policy, stamped into the record (default: one attempt). */
  readonly retry?: RetryPolicy | undefined
  /**
   * Checked on the current record under the store's guard: false declines the claim (a
   * per-provider cap that is full). Must be pure and quick.
   */
  readonly accept?: ((record: TaskRecord) => boolean) | undefined
}

/** What a heartbeat learned: the extended lease, and whether someone asked to cancel the task. */
export interface Heartbeat {
  readonly lease: Lease
  readonly cancelRequested: boolean
}

/** A queued task a worker may claim now, with the provider its payload asks for. */
export interface ReadyTask {
  readonly task_id: TaskId
  readonly provider: string
}

/** A task this worker now runs, and the lease that fences its outcome. */
export interface ClaimedTask {
  readonly record: TaskRecord
  readonly lease: Lease
}

/** What `claimNext` may take: how many tasks, and how many of each capped provider. */
export interface ClaimNextRequest {
  readonly workerId: string
  readonly leaseMillis: number
  readonly retry?: RetryPolicy | undefined
  /** At most this many claims (a worker's free slots). Zero claims nothing. */
  readonly limit: number
  /**
   * The room left for each capped provider: a provider named here gets at most that many of
   * the claims (0: none). Providers not named share `limit`.
   */
  readonly room?: ReadonlyMap<string, number> | undefined
}

/** What one `claimNext` took, oldest first, and what it passed over on the way. */
export interface ClaimBatch {
  /** Each with its own attempt and lease, exactly as `claim` would make them. */
  readonly claimed: ReadonlyArray<ClaimedTask>
  /** Damaged queued records met on the way; none is claimed. */
  readonly invalid: ReadonlyArray<InvalidRecordReport>
  /**
   * When the first queued task met that waits out a backoff becomes claimable; null when
   * none was met. Every waiting task is met when fewer than `limit` tasks were claimed.
   */
  readonly next_due_at: string | null
  /** Queued tasks met that wait out a backoff (all of them when fewer than `limit` were claimed). */
  readonly waiting: number
  /**
   * How many tasks are left queued after the batch, when the store can tell without reading
   * the queue (the file store's marker listing, the memory store's map); absent otherwise.
   * A hint for status lines: another worker may have claimed some meanwhile.
   */
  readonly queued?: number | undefined
  /**
   * Tasks passed over because another writer held them mid-change where the store cannot
   * tell what they will become: on the file store, a marker whose record is not yet written
   * (a submission in flight, whose wake-up came with its marker) or not yet requeued. Such a
   * task may be claimable a moment later, after the wake-up that announced it: a worker with
   * free slots asks again soon. Absent or 0 where a store cannot meet this (PostgreSQL: a row
   * is seen only once its transaction commits).
   */
  readonly busy?: number | undefined
}

/**
 * The running tasks, for reaping: bounded by the workers, never by the backlog. Their records
 * come without payloads (reaping needs the leases and attempts, never what was asked).
 */
export interface RunningSnapshot {
  readonly running: ReadonlyArray<RecordHead>
  readonly invalid: ReadonlyArray<InvalidRecordReport>
}

/** The live part of the queue: what a worker pass needs, and nothing finished. */
export interface LiveSnapshot {
  /** Queued tasks, oldest first (submission order, ties broken by task id). */
  readonly queued: ReadonlyArray<TaskId>
  /** The queued tasks that may be claimed now (not waiting out a backoff), in the same order. */
  readonly ready: ReadonlyArray<ReadyTask>
  /** When the first of the waiting tasks becomes claimable; null when none waits. */
  readonly next_due_at: string | null
  /** Running tasks with their leases. */
  readonly running: ReadonlyArray<TaskRecord>
  /** Damaged records met on the way. */
  readonly invalid: ReadonlyArray<InvalidRecordReport>
}

export interface ListRequest {
  readonly state?: TaskState | undefined
  /**
   * Only tasks this provider runs, named as the worker names them: a payload that names no
   * provider (or a provider that is not a string) is `fake-echo`'s, the built-in echo.
   */
  readonly provider?: string | undefined
  /** Only tasks whose client request id or task id contains this text, ignoring case. */
  readonly search?: string | undefined
  readonly limit?: number | undefined
  /** Filters apply before paging, so a cursor continues the same filtered listing. */
  readonly cursor?: string | undefined
}

export interface TaskPage {
  /** Newest first. */
  readonly tasks: ReadonlyArray<TaskSummary>
  readonly next_cursor: string | null
}

export interface CheckReport {
  readonly records: number
  readonly states: Readonly<Record<TaskState, number>>
  readonly invalid_records: ReadonlyArray<InvalidRecordReport>
}

/**
 * The watching workers of this queue, as each last announced itself (`domain/worker.ts`).
 * Hints, not acknowledged data: written without fsync, and each worker writes only its own.
 */
export interface WorkerRegistry {
  /** Create or replace this instance's entry. */
  readonly announce: (presence: WorkerPresence) => Effect.Effect<void, StorageError>
  /** Remove this instance's entry (a worker that stopped); no error when there is none. */
  readonly retire: (instance: string) => Effect.Effect<void, StorageError>
  /**
   * Every entry, late ones included, ordered by worker id; entries that do not decode are
   * left out. No side effects.
   */
  readonly list: Effect.Effect<ReadonlyArray<WorkerPresence>, StorageError>
  /** Remove the entries that expired before `expiredBefore` (epoch ms); returns how many. */
  readonly prune: (expiredBefore: number) => Effect.Effect<number, StorageError>
}

export type { CollectRequest } from "../domain/retention.js"

/** What a collection removed (or, dry, would remove), and the damaged records it left alone. */
export interface CollectReport {
  /** Oldest finished first. */
  readonly removed: ReadonlyArray<CollectedTask>
  /** Damaged records met; a collection never removes one, whatever its age. */
  readonly invalid: ReadonlyArray<InvalidRecordReport>
  readonly dry_run: boolean
}

/** Where an attempt's end left its task: finished, or queued again for another attempt. */
export type SettledState = "queued" | "complete" | "failed" | "cancelled"

export type ReadError = UnknownTask | HashMismatch | InvalidRecord | StorageError
export type OutcomeError = StaleAttempt | UnknownTask | InvalidRecord | StorageError

/**
 * The durable queue. Implementations: the file store (default, embedded), the memory store,
 * and PostgreSQL. All of them apply the pure transitions of `domain/transitions.ts`, so they
 * share one meaning of every operation; `test/contract/` holds the suite each must pass.
 * Their layers live beside them: `fileTaskStoreLayer` (store/file/layer.ts),
 * `memoryTaskStoreLayer` (store/memory/layer.ts) and `pgTaskStoreLayer` (store/postgres/layer.ts).
 */
export class TaskStore extends Context.Tag("relaykeep/TaskStore")<
  TaskStore,
  {
    /**
     * Queue a task. Idempotent: the same request id with the same payload returns the
     * identical receipt; with a different payload it fails with ConflictError and changes
     * nothing. The receipt is returned only once the task is durable.
     */
    readonly submit: (
      request: SubmitRequest
    ) => Effect.Effect<Receipt, InvalidInput | ConflictError | InvalidRecord | StorageError>
    /**
     * The whole stored record, payload included, with no hash to check: for the holder of the
     * dashboard's token, who may see everything. No side effects.
     */
    readonly record: (taskId: TaskId) => Effect.Effect<TaskRecord, UnknownTask | InvalidRecord | StorageError>
    /**
     * The task's record without its payload: what a running attempt polls for a cancel request
     * (once a second). No hash is asked for, and the payload's is not checked (that is for the
     * reads that return it); a store that keeps payloads apart does not read it. No side effects.
     */
    readonly peek: (taskId: TaskId) => Effect.Effect<RecordHead, UnknownTask | InvalidRecord | StorageError>
    /** The task's state, result and history. No side effects. */
    readonly read: (taskId: TaskId, payloadSha256: string) => Effect.Effect<TaskView, ReadError>
    /**
     * Cancel a queued task at once; on a running task, record the request for its worker
     * (`cancel_requested`); report the state of any other, unchanged.
     */
    readonly cancel: (taskId: TaskId, payloadSha256: string) => Effect.Effect<CancelOutcome, ReadError>
    /**
     * Queued and running tasks, and the damaged records met. Costs O(live tasks): for the
     * dashboard and `list`; no worker path reads it.
     */
    readonly live: Effect.Effect<LiveSnapshot, StorageError>
    /**
     * Claim up to `limit` ready tasks in one operation: oldest first (submission order, ties
     * by task id), passing over tasks that wait out a backoff, damaged records, tasks another
     * worker holds and providers with no room left. Its cost grows with what it claims and
     * passes over, not with the queue: no record is read that is neither claimed nor in the
     * way (on the file store a marker listing is read, names only).
     */
    readonly claimNext: (request: ClaimNextRequest) => Effect.Effect<ClaimBatch, StorageError>
    /** Running tasks with their leases, and damaged running records. Costs O(running tasks). */
    readonly running: Effect.Effect<RunningSnapshot, StorageError>
    /**
     * Move one queued task to running under a new attempt and lease. None when the task is
     * no longer queued (another worker took it, or it was cancelled).
     */
    readonly claim: (
      taskId: TaskId,
      request: ClaimRequest
    ) => Effect.Effect<Option.Option<ClaimedTask>, UnknownTask | InvalidRecord | StorageError>
    /** Extend the lease of a running attempt. Fenced: fails with StaleAttempt if it lost the task. */
    readonly heartbeat: (
      taskId: TaskId,
      lease: Lease,
      leaseMillis: number
    ) => Effect.Effect<Heartbeat, OutcomeError>
    /** Note the process group the running attempt's provider started (fenced by the lease). */
    readonly recordProcess: (
      taskId: TaskId,
      lease: Lease,
      processGroup: number
    ) => Effect.Effect<void, OutcomeError>
    /** Record the result of a running attempt, and what the provider did. Fenced by the lease. */
    readonly complete: (
      taskId: TaskId,
      lease: Lease,
      result: unknown,
      receipt?: AttemptReceipt
    ) => Effect.Effect<SettledState, OutcomeError>
    /**
     * Record the failure of a running attempt, and what the provider did. Fenced by the lease.
     * A retryable error of a task with attempts left queues it again after a backoff.
     */
    readonly fail: (
      taskId: TaskId,
      lease: Lease,
      error: TaskError,
      receipt?: AttemptReceipt
    ) => Effect.Effect<SettledState, OutcomeError>
    /** End a running attempt whose cancel was requested and whose processes were stopped. */
    readonly stopCancelled: (
      taskId: TaskId,
      lease: Lease,
      receipt?: AttemptReceipt
    ) => Effect.Effect<SettledState, OutcomeError>
    /**
     * Reap an orphaned attempt (`worker_lost`): queued again while attempts remain, else
     * failed (cancelled when a cancel was requested). Fenced by the lease the reaper saw; an
     * expired lease renewed meanwhile is not reaped (StaleAttempt).
     */
    readonly reap: (
      taskId: TaskId,
      lease: Lease,
      reason: OrphanReason
    ) => Effect.Effect<"queued" | "failed" | "cancelled", OutcomeError>
    /** Give a running attempt back at shutdown: queued at once while attempts remain, else failed. */
    readonly release: (
      taskId: TaskId,
      lease: Lease
    ) => Effect.Effect<"queued" | "failed" | "cancelled", OutcomeError>
    /**
     * Signals that the queue may have new work (a submission, a requeue): a file-system watch
     * for the file store, LISTEN/NOTIFY for PostgreSQL. Best effort: a worker still polls.
     */
    readonly wakeups: Stream.Stream<void>
    /**
     * The ids of tasks as they change (any write), so that a waiting `read` wakes at once.
     * Best effort, like `wakeups`: a waiting reader still polls.
     */
    readonly changes: Stream.Stream<TaskId>
    /** A page of task summaries, newest first. */
    readonly list: (request: ListRequest) => Effect.Effect<TaskPage, InvalidInput | StorageError>
    /** Read every record and report every damaged one. Costs O(all tasks). */
    readonly check: Effect.Effect<CheckReport, StorageError>
    /**
     * How many tasks are in each state, as cheaply as the store can tell: one grouped query of
     * the state column on PostgreSQL (where a damaged row counts under the state its column
     * names), a read of every record on the file store (as `check`, damaged ones not counted).
     */
    readonly counts: Effect.Effect<Readonly<Record<TaskState, number>>, StorageError>
    /**
     * Remove finished tasks (complete, failed, cancelled) that finished before the cutoff, but
     * the newest `keepLast` finished ones and any whose ttl still holds (`domain/retention.ts`).
     * Queued and running tasks are never removed, nor is a damaged record (it is reported). Each
     * task goes with its index entries, durably, before the report returns; a removed task reads
     * as UnknownTask, and its request id submitted again makes a new task. Costs O(all tasks).
     */
    readonly collect: (request: CollectRequest) => Effect.Effect<CollectReport, InvalidInput | StorageError>
    /** The watching workers and their heartbeats. */
    readonly workers: WorkerRegistry
  }
>() {}

export type TaskStoreShape = Context.Tag.Service<TaskStore>
