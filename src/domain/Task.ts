import { Schema } from "effect"
import { Integer, JsonObject, JsonValue, mustBe } from "./fields.js"
import { ClientRequestId, PayloadSha256, TaskId } from "./ids.js"
import { AttemptReceipt } from "./provider.js"

/** A payload is a JSON object of whatever shape. Its size limit is a store setting. */
export { JsonObject } from "./fields.js"

export const TaskStates = ["queued", "running", "complete", "failed", "cancelled"] as const
export const TaskState = Schema.Literal(...TaskStates).annotations({
  message: mustBe(`one of ${TaskStates.join(", ")}`)
})
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
  tag: Schema.String.annotations({
    description: "The error's tag, such as ProviderFailed or ProviderTimeout"
  }),
  message: Schema.String.annotations({ description: "What went wrong, at most 1,000 characters" }),
  stderr_tail: Schema.optional(
    Schema.String.annotations({ description: "The end of the provider's stderr, at most 300 characters" })
  ),
  stdout_error: Schema.optional(
    Schema.String.annotations({
      description: "The failure field of the provider's output, at most 300 characters"
    })
  ),
  /** Whether another attempt could succeed (absent in records written before retries existed). */
  retryable: Schema.optional(
    Schema.Boolean.annotations({ description: "Whether another attempt could succeed" })
  )
}).annotations({ description: "Why it failed" })
export type TaskError = typeof TaskError.Type

/**
 * The claim a worker holds on a running task. Only the holder of the current attempt,
 * identified by `owner_token`, may write the task's outcome (fencing).
 */
export const Lease = Schema.Struct({
  owner_token: Schema.String,
  worker_id: Schema.String,
  pid: Integer(),
  host: Schema.String,
  boot_id: Schema.String,
  attempt: Integer({ minimum: 1 }),
  claimed_at: Timestamp,
  expires_at: Timestamp
})
export type Lease = typeof Lease.Type

export const AttemptOutcome = Schema.Literal("running", "complete", "failed", "cancelled")

const WorkerId = Schema.String.annotations({ description: "The worker that ran the attempt" })
const Pid = Integer().annotations({ description: "The worker's process id on its host" })
const HostName = Schema.String.annotations({ description: "The host the worker ran on" })

/**
 * What an attempt reported after it had lost the task (its lease expired and the task was
 * reaped or claimed again): kept in the history, never taken as the task's result.
 */
export const LateOutcome = Schema.Struct({
  outcome: Schema.Literal("complete", "failed", "cancelled").annotations({
    description: "What the attempt reported"
  }),
  reported_at: Timestamp.annotations({ description: "When it reported it" }),
  result: Schema.optional(JsonValue.annotations({ description: "The result it reported, any JSON value" })),
  error: Schema.optional(TaskError),
  receipt: Schema.optional(AttemptReceipt)
}).annotations({
  description:
    "What the attempt reported after it had lost the task (its lease had expired): kept for the record, never the task's result"
})
export type LateOutcome = typeof LateOutcome.Type

export const Attempt = Schema.Struct({
  attempt: Integer({ minimum: 1 }).annotations({ description: "The attempt's number, from 1" }),
  worker_id: WorkerId,
  pid: Pid,
  host: HostName,
  started_at: Timestamp.annotations({ description: "When the attempt started (ISO-8601 UTC)" }),
  ended_at: Schema.NullOr(Timestamp).annotations({
    description: "When it ended (ISO-8601 UTC); null while it runs"
  }),
  outcome: AttemptOutcome.annotations({ description: "How the attempt ended; running while it runs" }),
  error: Schema.NullOr(TaskError).annotations({
    description: "Why the attempt failed; null unless it failed"
  }),
  /** What the provider did in this attempt (absent for the built-in echo). */
  receipt: Schema.optional(AttemptReceipt),
  late: Schema.optional(LateOutcome),
  /**
   * The process group of the provider's CLI, on the lease's host: what a reaper stops when the
   * worker that started it is gone (after checking the group still serves this attempt).
   */
  process_group: Schema.optional(
    Integer({ minimum: 1 }).annotations({
      description: "The process group of the provider's CLI on the worker's host"
    })
  )
})
export type Attempt = typeof Attempt.Type

/**
 * How often a task may run and how long it waits between attempts: the policy of the worker
 * that last claimed it, stamped into the record so that any reaper applies the same one.
 */
export const RetryPolicy = Schema.Struct({
  max_attempts: Integer({ minimum: 1 }),
  backoff_initial_ms: Integer({ minimum: 0 }),
  backoff_max_ms: Integer({ minimum: 0 })
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
  attempt: Integer({ minimum: 0 }),
  lease: Schema.NullOr(Lease),
  result: JsonValue,
  error: Schema.NullOr(TaskError),
  attempts: Schema.Array(Attempt),
  /** The policy of the worker that last claimed the task. */
  retry: Schema.optional(RetryPolicy),
  /** A requeued task waits until then before a worker may claim it again. */
  not_before: Schema.optional(Timestamp),
  /** Someone asked to cancel the task while it was running; its worker stops it. */
  cancel_requested_at: Schema.optional(Timestamp),
  /**
   * How long its submitter asked for the finished task to be kept, in milliseconds (an MCP
   * task's `ttl`); null when it asked for no limit, absent when it did not say. RelayKeep keeps
   * every task until it is removed on purpose, so this is a floor it always meets.
   */
  ttl_ms: Schema.optional(Schema.NullOr(Integer({ minimum: 0 })))
})
export type TaskRecord = typeof TaskRecord.Type

/**
 * A task's record without its payload: what a worker reads of a task it already holds (the
 * cancel poll) and what reaping reads of the running tasks. A payload never changes after its
 * submission, so nothing read this way needs it, and a store that keeps payloads apart (the
 * PostgreSQL store) never sends them.
 */
export const RecordHead = TaskRecord.pipe(Schema.omit("payload"))
export type RecordHead = typeof RecordHead.Type

/** `record` without its payload. */
export const headOf = (record: TaskRecord): RecordHead => {
  const { payload, ...head } = record
  void payload
  return head
}

/** The fields the answers share, described once. */
const Described = {
  task_id: TaskId.annotations({ description: "The task's id: 64 lowercase hex characters" }),
  client_request_id: ClientRequestId.annotations({
    description: "The idempotency key it was submitted under"
  }),
  payload_sha256: PayloadSha256.annotations({
    description:
      "The SHA-256 of the payload's canonical JSON (64 lowercase hex characters); reading or cancelling the task needs it with task_id"
  }),
  state: TaskState.annotations({ description: `The task's state: ${TaskStates.join(", ")}` }),
  created_at: Timestamp.annotations({ description: "When the task was submitted (ISO-8601 UTC)" }),
  updated_at: Timestamp.annotations({ description: "When the task last changed (ISO-8601 UTC)" }),
  started_at: Schema.NullOr(Timestamp).annotations({
    description: "When its first attempt started (ISO-8601 UTC); null while queued"
  }),
  finished_at: Schema.NullOr(Timestamp).annotations({
    description: "When it finished (ISO-8601 UTC); null until complete, failed or cancelled"
  }),
  attempt: Integer({ minimum: 0 }).annotations({
    description: "How many attempts have started (0 while never run)"
  })
}

/** What `submit` returns. Identical, byte for byte, for every resubmission of the same request. */
export const Receipt = Schema.Struct({
  task_id: Described.task_id,
  payload_sha256: Described.payload_sha256,
  created_at: Described.created_at
})
export type Receipt = typeof Receipt.Type

/** What `read` returns: everything but the payload, which the reader already has. */
export const TaskView = Schema.Struct({
  task_id: Described.task_id,
  client_request_id: Described.client_request_id,
  payload_sha256: Described.payload_sha256,
  state: Described.state,
  result: JsonValue.annotations({
    description: "The provider's answer when complete (any JSON value); null until then"
  }),
  error: Schema.NullOr(TaskError).annotations({ description: "Why the task failed; null unless it failed" }),
  created_at: Described.created_at,
  updated_at: Described.updated_at,
  started_at: Described.started_at,
  finished_at: Described.finished_at,
  attempt: Described.attempt,
  attempts: Schema.Array(Attempt).annotations({ description: "Every attempt so far, oldest first" }),
  max_attempts: Integer({ minimum: 1 }).annotations({
    description: "How many attempts the task may have in all"
  }),
  not_before: Schema.NullOr(Timestamp).annotations({
    description: "A requeued task waits until then (ISO-8601 UTC) before it runs again; else null"
  }),
  cancel_requested_at: Schema.NullOr(Timestamp).annotations({
    description: "When a cancel was asked for while the task was running (ISO-8601 UTC); else null"
  })
})
export type TaskView = typeof TaskView.Type

/**
 * What `cancel` did: `cancelled` when the task is (now) cancelled; `cancel_requested` when it
 * is running and its worker has been asked to stop it (it ends `cancelled` once stopped).
 */
export const CancelOutcome = Schema.Struct({
  task_id: Described.task_id,
  cancelled: Schema.Boolean.annotations({
    description: "Whether the task is now cancelled (true again if it already was)"
  }),
  cancel_requested: Schema.Boolean.annotations({
    description:
      "Whether the task was running and its worker has been asked to stop it; it then reads as cancelled"
  }),
  state: Described.state
})
export type CancelOutcome = typeof CancelOutcome.Type

/** One line of a listing: enough to pick a task, without payload or result. */
export const TaskSummary = Schema.Struct({
  task_id: Described.task_id,
  client_request_id: Described.client_request_id,
  payload_sha256: Described.payload_sha256,
  state: Described.state,
  /** The payload's `provider` when it is a string; null when it names none (the echo runs it). */
  provider: Schema.NullOr(Schema.String).annotations({
    description: "The provider the payload names; null when it names none"
  }),
  created_at: Described.created_at,
  updated_at: Described.updated_at,
  started_at: Described.started_at,
  finished_at: Described.finished_at,
  attempt: Described.attempt
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
export const submissionOrder = (
  a: { readonly created_at: string; readonly task_id: string },
  b: { readonly created_at: string; readonly task_id: string }
): number =>
  a.created_at < b.created_at
    ? -1
    : a.created_at > b.created_at
      ? 1
      : a.task_id < b.task_id
        ? -1
        : a.task_id > b.task_id
          ? 1
          : 0
