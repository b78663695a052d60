import type { Effect } from "effect"
import { Context } from "effect"
import type { TaskId } from "../domain/ids.js"

/** How an attempt ended, as a watching worker reports it (the tag of `AttemptEnd`). */
export type AttemptOutcome = "complete" | "failed" | "cancelled" | "stale"

export type WorkerEvent =
  | {
      readonly event: "started"
      readonly worker_id: string
      readonly pid: number
      readonly concurrency: number
      readonly max_per_provider: Readonly<Record<string, number>>
      readonly max_attempts: number
    }
  | {
      readonly event: "claimed"
      readonly task_id: TaskId
      readonly attempt: number
      readonly provider: string
    }
  | {
      readonly event: "finished"
      readonly task_id: TaskId
      readonly attempt: number
      readonly provider: string
      readonly outcome: AttemptOutcome
      readonly duration_ms: number
      readonly error?: { readonly tag: string; readonly message: string; readonly retryable: boolean }
      /** A failed attempt whose task went back to the queue. */
      readonly requeued?: boolean
    }
  | {
      readonly event: "reaped"
      readonly task_id: TaskId
      readonly attempt: number
      readonly reason: string
      readonly now: "queued" | "failed" | "cancelled"
    }
  | { readonly event: "released"; readonly task_id: TaskId; readonly attempt: number; readonly now: string }
  | {
      readonly event: "stopping"
      readonly reason: string
      readonly running: number
      readonly grace_ms: number
    }
  | { readonly event: "storage_error"; readonly message: string }
  /** The worker could not write its heartbeat to the worker registry (it keeps working). */
  | { readonly event: "heartbeat_failed"; readonly message: string }
  /** Its heartbeat was written again after failing. */
  | { readonly event: "heartbeat_restored" }
  /** A warning or error logged while the worker ran, in the same stream as the events. */
  | { readonly event: "log"; readonly level: string; readonly message: string }
  | {
      readonly event: "stopped"
      readonly reason: string
      readonly finished: number
      readonly failed: number
      readonly released: number
    }

/** The counts on the status line. */
export interface WorkerStatus {
  readonly running: number
  /** Tasks left in the queue, when the store can tell without reading it (not on PostgreSQL). */
  readonly queued: number | undefined
  readonly finished: number
  readonly failed: number
}

/**
 * What a watching worker tells its operator: each event as it happens, and the counts of a
 * status line as they change. Neither fails: output that cannot be written is not a reason to
 * stop running tasks.
 *
 * Layers: `workerOutputLayer(format, write)` and `workerOutputStderrLayer(format)`, in
 * src/worker/events.ts (JSON lines, text lines, or text under a live status line).
 */
export class WorkerOutput extends Context.Tag("relaykeep/WorkerOutput")<
  WorkerOutput,
  {
    readonly event: (event: WorkerEvent) => Effect.Effect<void>
    readonly status: (status: WorkerStatus) => Effect.Effect<void>
  }
>() {}
