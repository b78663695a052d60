import { Schema } from "effect"
import { ClientRequestId, PayloadSha256, TaskId } from "./ids.js"
import { AttemptReceipt } from "./provider.js"

/** A payload is a JSON object of whatever shape. Its size limit is a store setting. */
export const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  title: "JsonObject",
  description: "a JSON object"
})
export type JsonObject = typeof JsonObject.Type

export const TaskState = Schema.Literal("queued", "running", "complete", "failed", "cancelled")
export const isTaskState = Schema.is(TaskState)
export type TaskState = typeof TaskState.Type

export const isTerminal = (state: TaskState): boolean => state !== "queued" && state !== "running"

export { isoTime, timeMillis, Timestamp } from "./time.js"
import { Timestamp } from "./time.js"

/**
 * Why an attempt or a task failed: the error's tag and a readable message (at most 1,000
 * characters), with the end of stderr and a failure field of stdout when a provider gave them
 * (at most 300 characters each). Every cut is marked `[truncated]`.
 */
export const TaskError = Schema.Struct({
  tag: Schema.String,
  message: Schema.String,
  stderr_tail: Schema.optional(Schema.String),
  stdout_error: Schema.optional(Schema.String),
  /** Whether another attempt could succeed (absent in records written before retries existed). */
  retryable: Schema.optional(Schema.Boolean)
})
export type TaskError = typeof TaskError.Type

/**
 * The claim a worker holds on a running task. Only the holder of the current attempt,
 * identified by `owner_token`, may write the task's outcome (fencing).
 */
export const Lease = Schema.Struct({
  owner_token: Schema.String,
  worker_id: Schema.String,
  pid: Schema.Int,
  host: Schema.String,
  boot_id: Schema.String,
  attempt: Schema.Int.pipe(Schema.positive()),
  claimed_at: Timestamp,
  expires_at: Timestamp
})
export type Lease = typeof Lease.Type

export const AttemptOutcome = Schema.Literal("running", "complete", "failed", "cancelled")

/**
 * What an attempt reported after it had lost the task (its lease expired and the task was
 * reaped or claimed again): kept in the history, never taken as the task's result.
 */
export const LateOutcome = Schema.Struct({
  outcome: Schema.Literal("complete", "failed", "cancelled"),
  reported_at: Timestamp,
  result: Schema.optional(Schema.Unknown),
  error: Schema.optional(TaskError),
  receipt: Schema.optional(AttemptReceipt)
})
export type LateOutcome = typeof LateOutcome.Type

export const Attempt = Schema.Struct({
  attempt: Schema.Int.pipe(Schema.positive()),
  worker_id: Schema.String,
  pid: Schema.Int,
  host: Schema.String,
  started_at: Timestamp,
  ended_at: Schema.NullOr(Timestamp),
  outcome: AttemptOutcome,
  error: Schema.NullOr(TaskError),
  /** What the provider did in this attempt (absent for the built-in echo). */
  receipt: Schema.optional(AttemptReceipt),
  late: Schema.optional(LateOutcome),
  /**
   * The process group of the provider's CLI, on the lease's host: what a reaper stops when the
   * worker that started it is gone (after checking the group still serves this attempt).
   */
  process_group: Schema.optional(Schema.Int.pipe(Schema.positive()))
})
export type Attempt = typeof Attempt.Type

/**
 * How often a task may run and how long it waits between attempts: the policy of the worker
 * that last claimed it, stamped into the record so that any reaper applies the same one.
 */
export const RetryPolicy = Schema.Struct({
  max_attempts: Schema.Int.pipe(Schema.positive()),
  backoff_initial_ms: Schema.Int.pipe(Schema.nonNegative()),
  backoff_max_ms: Schema.Int.pipe(Schema.nonNegative())
})
export type RetryPolicy = typeof RetryPolicy.Type

/** Run once: a coding agent that may have edited files is not re-run unless its user asks. */
export const DefaultRetryPolicy: RetryPolicy = {
  max_attempts: 1,
  backoff_initial_ms: 10_000,
  backoff_max_ms: 600_000
}

/** The stored record: the single source of truth about one task. */
export const TaskRecord = Schema.Struct({
  schema_version: Schema.Literal(1),
  task_id: TaskId,
  client_request_id: ClientRequestId,
  payload_sha256: PayloadSha256,
  payload: JsonObject,
  state: TaskState,
  created_at: Timestamp,
  updated_at: Timestamp,
  started_at: Schema.NullOr(Timestamp),
  finished_at: Schema.NullOr(Timestamp),
  attempt: Schema.Int.pipe(Schema.nonNegative()),
  lease: Schema.NullOr(Lease),
  result: Schema.Unknown,
  error: Schema.NullOr(TaskError),
  attempts: Schema.Array(Attempt),
  /** The policy of the worker that last claimed the task. */
  retry: Schema.optional(RetryPolicy),
  /** A requeued task waits until then before a worker may claim it again. */
  not_before: Schema.optional(Timestamp),
  /** Someone asked to cancel the task while it was running; its worker stops it. */
  cancel_requested_at: Schema.optional(Timestamp)
})
export type TaskRecord = typeof TaskRecord.Type

/** What `submit` returns. Identical, byte for byte, for every resubmission of the same request. */
export const Receipt = Schema.Struct({
  task_id: TaskId,
  payload_sha256: PayloadSha256,
  created_at: Timestamp
})
export type Receipt = typeof Receipt.Type

/** What `read` returns: everything but the payload, which the reader already has. */
export const TaskView = Schema.Struct({
  task_id: TaskId,
  client_request_id: ClientRequestId,
  payload_sha256: PayloadSha256,
  state: TaskState,
  result: Schema.Unknown,
  error: Schema.NullOr(TaskError),
  created_at: Timestamp,
  updated_at: Timestamp,
  started_at: Schema.NullOr(Timestamp),
  finished_at: Schema.NullOr(Timestamp),
  attempt: Schema.Int,
  attempts: Schema.Array(Attempt),
  max_attempts: Schema.Int,
  not_before: Schema.NullOr(Timestamp),
  cancel_requested_at: Schema.NullOr(Timestamp)
})
export type TaskView = typeof TaskView.Type

/**
 * What `cancel` did: `cancelled` when the task is (now) cancelled; `cancel_requested` when it
 * is running and its worker has been asked to stop it (it ends `cancelled` once stopped).
 */
export const CancelOutcome = Schema.Struct({
  task_id: TaskId,
  cancelled: Schema.Boolean,
  cancel_requested: Schema.Boolean,
  state: TaskState
})
export type CancelOutcome = typeof CancelOutcome.Type

/** One line of a listing: enough to pick a task, without payload or result. */
export const TaskSummary = Schema.Struct({
  task_id: TaskId,
  client_request_id: ClientRequestId,
  payload_sha256: PayloadSha256,
  state: TaskState,
  /** The payload's `provider` when it is a string; null when it names none (the echo runs it). */
  provider: Schema.NullOr(Schema.String),
  created_at: Timestamp,
  updated_at: Timestamp,
  started_at: Schema.NullOr(Timestamp),
  finished_at: Schema.NullOr(Timestamp),
  attempt: Schema.Int
})
export type TaskSummary = typeof TaskSummary.Type

export const InvalidRecordReport = Schema.Struct({ file: Schema.String, reason: Schema.String })
export type InvalidRecordReport = typeof InvalidRecordReport.Type

export const toReceipt = (record: TaskRecord): Receipt => ({
  task_id: record.task_id,
  payload_sha256: record.payload_sha256,
  created_at: record.created_at
})

export const toView = (record: TaskRecord): TaskView => ({
  task_id: record.task_id,
  client_request_id: record.client_request_id,
  payload_sha256: record.payload_sha256,
  state: record.state,
  result: record.result,
  error: record.error,
  created_at: record.created_at,
  updated_at: record.updated_at,
  started_at: record.started_at,
  finished_at: record.finished_at,
  attempt: record.attempt,
  attempts: record.attempts,
  max_attempts: (record.retry ?? DefaultRetryPolicy).max_attempts,
  not_before: record.not_before ?? null,
  cancel_requested_at: record.cancel_requested_at ?? null
})

/** The provider a payload names, as listings show it: null when it names none. */
export const namedProvider = (payload: JsonObject): string | null => {
  const provider = payload["provider"]
  return typeof provider === "string" ? provider : null
}

export const toSummary = (record: TaskRecord): TaskSummary => ({
  task_id: record.task_id,
  client_request_id: record.client_request_id,
  payload_sha256: record.payload_sha256,
  state: record.state,
  provider: namedProvider(record.payload),
  created_at: record.created_at,
  updated_at: record.updated_at,
  started_at: record.started_at,
  finished_at: record.finished_at,
  attempt: record.attempt
})

/** Submission order: oldest first, ties broken by task id. */
export const submissionOrder = (a: TaskRecord, b: TaskRecord): number =>
  a.created_at < b.created_at
    ? -1
    : a.created_at > b.created_at
      ? 1
      : a.task_id < b.task_id
        ? -1
        : a.task_id > b.task_id
          ? 1
          : 0
