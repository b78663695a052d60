import { Context } from "effect"
import type { Effect, Stream } from "effect"
import type {
  ConflictError,
  HashMismatch,
  InvalidInput,
  InvalidRecord,
  NotHeldHere,
  StorageError,
  TaskFinished,
  UnknownTask
} from "../domain/errors.js"
import type { InServerEnd, InServerOutcome, McpTask, McpToolResult } from "../domain/mcpTask.js"
import type { TaskId } from "../domain/ids.js"
import type { Receipt } from "../domain/Task.js"

/** A tool call that a server runs itself, as a task. */
export interface InServerTask {
  readonly server: string
  readonly tool: string
  /** The call's arguments, redacted (they are kept in the task's payload). */
  readonly arguments: unknown
  /** How long to keep the finished task, in milliseconds; null for no limit. */
  readonly ttl: number | null
}

/** A failure a task's work reports: its tag and message become the task's error. */
export interface WorkFailure {
  readonly _tag: string
  readonly message: string
}

/** Why a task request was refused: a handle that is not one, or the queue's own errors. */
export type TaskLookupError = InvalidInput | UnknownTask | HashMismatch | InvalidRecord | StorageError

/** Why a task could not be created: the queue's errors on submit and claim. */
export type TaskCreateError = TaskLookupError | ConflictError

export interface TaskPageOfMcp {
  readonly tasks: ReadonlyArray<McpTask>
  readonly nextCursor?: string
}

/**
 * MCP tasks (protocol revision 2025-11-25) on RelayKeep's durable queue. A task's id is a
 * handle naming a RelayKeep task and its payload hash, so any server process of the same queue
 * answers for it, after a restart too; a forged or altered handle fails as a wrong hash does.
 * Tasks a server runs itself are RelayKeep tasks of the provider `mcp-tool`: submitted and
 * claimed at once by the server, heartbeated while they run, and reaped as failed (interrupted)
 * when their server is gone.
 *
 * Layer: `mcpTasksLayer` (src/mcp/taskEngine.ts), on the `TaskStore` and `Host` in context.
 */
export class McpTasks extends Context.Tag("relaykeep/McpTasks")<
  McpTasks,
  {
    /**
     * Start `work` as a task of this server: durable before this returns; the work runs in the
     * background, its result or failure kept in the queue's store. A cancel stops it; the end of
     * the server process fails it as interrupted. `onEnd` hears how it ended, once that is written.
     */
    readonly start: (
      task: InServerTask,
      work: (taskId: TaskId) => Effect.Effect<McpToolResult, WorkFailure>,
      onEnd?: (taskId: TaskId, end: InServerEnd) => Effect.Effect<void>
    ) => Effect.Effect<McpTask, TaskCreateError>
    /**
     * Create a task of this server whose outcome is reported later by `settle` (for the SDK's
     * task-store interface): heartbeated meanwhile, failed as interrupted if the server ends first.
     */
    readonly hold: (task: InServerTask) => Effect.Effect<McpTask, TaskCreateError>
    /**
     * Report the outcome of a held task; durable when this returns (a write that kept failing
     * fails this), `NotHeldHere` when this process does not run it (any more).
     */
    readonly settle: (
      taskId: string,
      outcome: InServerOutcome | { readonly _tag: "cancelled" }
    ) => Effect.Effect<void, TaskLookupError | NotHeldHere>
    /** The task a queued RelayKeep task is (a `submit` called as a task). */
    readonly describe: (receipt: Receipt) => Effect.Effect<McpTask, TaskLookupError>
    /** `tasks/get`. */
    readonly get: (taskId: string) => Effect.Effect<McpTask, TaskLookupError>
    /**
     * `tasks/result`: waits until the task is finished, calling `progress` with the seconds
     * waited each time it looks, then answers with the result the task produced.
     */
    readonly result: (
      taskId: string,
      progress: (seconds: number, message: string) => Effect.Effect<void>
    ) => Effect.Effect<McpToolResult, TaskLookupError>
    /** `tasks/list`: every task of the queue, newest first, a page at a time. */
    readonly list: (cursor: string | undefined) => Effect.Effect<TaskPageOfMcp, TaskLookupError>
    /**
     * `tasks/cancel`: a queued task is cancelled at once; a running one is asked to stop, and
     * this waits a few seconds for it to end. Refused for a task already finished.
     */
    readonly cancel: (taskId: string) => Effect.Effect<McpTask, TaskLookupError | TaskFinished>
    /**
     * The tasks this server created or was asked about, each time one changes: what
     * `notifications/tasks/status` carries. Best effort, like the store's `changes`.
     */
    readonly changes: Stream.Stream<McpTask>
  }
>() {}
