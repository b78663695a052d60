import type { Effect } from "effect"
import { Context } from "effect"
import type { WorkerEvent } from "../domain/workerEvent.js"

export type { AttemptOutcome, WorkerEvent } from "../domain/workerEvent.js"

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
