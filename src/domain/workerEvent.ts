/**
 * What a watching worker reports, event by event: one JSON object per line on stderr with
 * `--log-format json` (each with its `time`), the same events as readable lines otherwise. The
 * schema is the contract for log shippers and scripts that read the stream.
 */
import { Schema } from "effect"
import { TaskId } from "./ids.js"
import { Timestamp } from "./time.js"

/** How an attempt ended, as a watching worker reports it. */
export const AttemptOutcome = Schema.Literal("complete", "failed", "cancelled", "stale")
export type AttemptOutcome = typeof AttemptOutcome.Type

/** Where a task went when its attempt was reaped or given back: queued again, or ended. */
export const SettledAfterLoss = Schema.Literal("queued", "failed", "cancelled")

export const WorkerEvent = Schema.Union(
  Schema.Struct({
    event: Schema.Literal("started"),
    worker_id: Schema.String,
    pid: Schema.Int,
    concurrency: Schema.Int,
    max_per_provider: Schema.Record({ key: Schema.String, value: Schema.Int }),
    max_attempts: Schema.Int
  }),
  Schema.Struct({
    event: Schema.Literal("claimed"),
    task_id: TaskId,
    attempt: Schema.Int,
    provider: Schema.String
  }),
  Schema.Struct({
    event: Schema.Literal("finished"),
    task_id: TaskId,
    attempt: Schema.Int,
    provider: Schema.String,
    outcome: AttemptOutcome,
    duration_ms: Schema.Number,
    error: Schema.optional(
      Schema.Struct({ tag: Schema.String, message: Schema.String, retryable: Schema.Boolean })
    ),
    /** A failed attempt whose task went back to the queue. */
    requeued: Schema.optional(Schema.Boolean)
  }),
  Schema.Struct({
    event: Schema.Literal("reaped"),
    task_id: TaskId,
    attempt: Schema.Int,
    reason: Schema.Literal("lease_expired", "owner_dead", "owner_rebooted"),
    /** The task's state after the reap. */
    state: SettledAfterLoss
  }),
  Schema.Struct({
    event: Schema.Literal("released"),
    task_id: TaskId,
    attempt: Schema.Int,
    /** The task's state after it was given back at shutdown. */
    state: SettledAfterLoss
  }),
  Schema.Struct({
    event: Schema.Literal("stopping"),
    reason: Schema.String,
    running: Schema.Int,
    grace_ms: Schema.Int
  }),
  Schema.Struct({ event: Schema.Literal("storage_error"), message: Schema.String }),
  /** The worker could not write its heartbeat to the worker registry (it keeps working). */
  Schema.Struct({ event: Schema.Literal("heartbeat_failed"), message: Schema.String }),
  /** Its heartbeat was written again after failing. */
  Schema.Struct({ event: Schema.Literal("heartbeat_restored") }),
  /**
   * A collection of finished tasks (`--retention`): those that finished before
   * `finished_before` are removed; `damaged` records met are kept (`relaykeep check`).
   */
  Schema.Struct({
    event: Schema.Literal("collected"),
    finished_before: Timestamp,
    removed: Schema.Int,
    damaged: Schema.Int
  }),
  /** A collection failed; the worker keeps working and tries again at the next one. */
  Schema.Struct({ event: Schema.Literal("collect_failed"), message: Schema.String }),
  /** A warning or error logged while the worker ran, in the same stream as the events. */
  Schema.Struct({ event: Schema.Literal("log"), level: Schema.String, message: Schema.String }),
  Schema.Struct({
    event: Schema.Literal("stopped"),
    reason: Schema.String,
    finished: Schema.Int,
    failed: Schema.Int,
    released: Schema.Int
  })
)
export type WorkerEvent = typeof WorkerEvent.Type

/** One line of `--log-format json`: an event and when it happened. */
export const WorkerEventLine = Schema.extend(Schema.Struct({ time: Timestamp }), WorkerEvent)
export type WorkerEventLine = typeof WorkerEventLine.Type
