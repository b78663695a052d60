/**
 * MCP tasks through the pipeline: a `tools/call` made as a task, and the `tasks/*` requests,
 * each checked and audited like any tool call (the `tasks/*` requests under their method names).
 */
import { Effect, Option, Schema } from "effect"
import { InvalidInput } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import type { InServerEnd } from "../domain/mcpTask.js"
import { McpTask, McpToolResult, parseHandle } from "../domain/mcpTask.js"
import { Receipt } from "../domain/Task.js"
import type { AuditLog } from "../services/AuditLog.js"
import { McpTasks } from "../services/McpTasks.js"
import { InvalidArguments } from "./errors.js"
import type { CallContext, Perform } from "./pipeline.js"
import { auditedCall, bounded, okResult, runTool, statusOf } from "./pipeline.js"
import type { Tool, ToolFailure } from "./Tool.js"
import { defineTool } from "./Tool.js"

/** A tool that cannot be called the way it was: as a task when it forbids it, or plainly when it requires it. */
export class TaskSupportMismatch extends Schema.TaggedError<TaskSupportMismatch>()("TaskSupportMismatch", {
  tool: Schema.String,
  support: Schema.String
}) {
  override get message() {
    return this.support === "required"
      ? `${this.tool} runs only as a task: call it with a task field (tasks/result fetches its answer)`
      : `${this.tool} cannot be called as a task: call it without a task field`
  }
}

/** The failure an in-server run's end is audited with; none for a result. */
const failureOf = (end: InServerEnd): ToolFailure | undefined => {
  switch (end._tag) {
    case "complete":
      return undefined
    case "failed":
      return { _tag: end.error.tag, message: end.error.message }
    case "cancelled":
      return { _tag: "Cancelled", message: "the task was cancelled before the tool finished" }
    case "interrupted":
      return { _tag: "Interrupted", message: "the server stopped before the tool finished" }
    case "lost":
      return { _tag: "Lost", message: "another process ended the task: it found this server gone" }
    case "unwritten":
      return { _tag: "StorageError", message: `the tool's outcome could not be written: ${end.reason}` }
  }
}

/** Refuses a call made the way its tool does not take: as a task when forbidden, plainly when required. */
export const admitTaskSupport =
  (asTask: boolean) =>
  <R>(tool: Tool<R>): TaskSupportMismatch | undefined =>
    (asTask ? tool.taskSupport === "forbidden" : tool.taskSupport === "required")
      ? new TaskSupportMismatch({ tool: tool.name, support: tool.taskSupport })
      : undefined

/** A server asked to create a task without `McpTasks` in its context. */
export class TasksUnavailable extends Schema.TaggedError<TasksUnavailable>()("TasksUnavailable", {}) {
  override get message() {
    return "this server keeps no tasks"
  }
}

const asArguments = (tool: string) => (error: ToolFailure) =>
  error instanceof InvalidInput ? new InvalidArguments({ tool, reason: error.message }) : error

/**
 * Perform a call as a task. A tool whose answer is the receipt of a task it queued (`submit`)
 * runs as usual, and its queued task is the MCP task. Any other runs in the background of this
 * server under a task of its own, whose end is audited as the tool's when it comes.
 */
export const performAsTask =
  <R>(context: CallContext, ttl: number | null): Perform<R, McpTask> =>
  (tool, prepared, audit, auditedArguments) =>
    Effect.gen(function* () {
      const found = yield* Effect.serviceOption(McpTasks)
      if (Option.isNone(found)) return yield* new TasksUnavailable()
      const tasks = found.value
      const asTask = { ...context, task: { ttl } }
      if (tool.queuedTask) {
        const answer = yield* bounded(tool, prepared(asTask))
        // The tool's own answer, encoded by its own schema: not a receipt is a bug in the tool.
        const receipt = yield* Effect.orDie(Schema.decodeUnknown(Receipt)(answer))
        const task = yield* Effect.mapError(tasks.describe(receipt), asArguments(tool.name))
        return { value: task, taskId: receipt.task_id, durability: "synced" as const }
      }
      const services = yield* Effect.context<R | AuditLog>()
      // The run's end is audited once it is written, as it was written; an entry that cannot be
      // written changes nothing of the task, and the server's log says why.
      const auditEnd = (taskId: TaskId, end: InServerEnd) => {
        const failure = failureOf(end)
        return audit(failure === undefined ? "ok" : statusOf(failure), failure, { taskId }).pipe(
          Effect.catchAll((error) =>
            Effect.logError(`task ${taskId}: its end could not be audited: ${error.message}`)
          ),
          Effect.provide(services)
        )
      }
      const work = () => Effect.map(bounded(tool, prepared(asTask)), okResult).pipe(Effect.provide(services))
      const task = yield* Effect.mapError(
        tasks.start(
          { server: context.server, tool: tool.name, arguments: auditedArguments, ttl },
          work,
          auditEnd
        ),
        asArguments(tool.name)
      )
      const created = Option.map(parseHandle(task.taskId), (handle) => handle.taskId)
      return { value: task, taskId: Option.getOrUndefined(created), durability: "synced" as const }
    })

const TaskIdArgument = Schema.String.annotations({ description: "The taskId the task was created with" })

/** The `tasks/*` requests as tools: decoded, run and audited by the same pipeline. */
export const taskRequestTools: ReadonlyArray<Tool<McpTasks>> = [
  defineTool({
    name: "tasks/get",
    description: "A task's status.",
    input: Schema.Struct({ taskId: TaskIdArgument }),
    output: McpTask,
    tier: "read_only",
    handler: ({ taskId }) => Effect.flatMap(McpTasks, (tasks) => tasks.get(taskId))
  }),
  defineTool({
    name: "tasks/result",
    description: "A task's result, once it is finished.",
    input: Schema.Struct({ taskId: TaskIdArgument }),
    output: McpToolResult,
    tier: "read_only",
    handler: ({ taskId }, context) =>
      Effect.flatMap(McpTasks, (tasks) =>
        tasks.result(taskId, (seconds, message) => context.progress(seconds, undefined, message))
      )
  }),
  defineTool({
    name: "tasks/list",
    description: "The tasks of this queue, newest first.",
    input: Schema.Struct({
      cursor: Schema.optional(Schema.String.annotations({ description: "The nextCursor of the page before" }))
    }),
    output: Schema.Struct({ tasks: Schema.Array(McpTask), nextCursor: Schema.optional(Schema.String) }),
    tier: "read_only",
    handler: ({ cursor }) => Effect.flatMap(McpTasks, (tasks) => tasks.list(cursor))
  }),
  defineTool({
    name: "tasks/cancel",
    description: "Cancel a task.",
    input: Schema.Struct({ taskId: TaskIdArgument }),
    output: McpTask,
    tier: "write",
    idempotent: true,
    handler: ({ taskId }) => Effect.flatMap(McpTasks, (tasks) => tasks.cancel(taskId))
  })
]

/** Run a `tasks/*` request through the pipeline. */
export const taskRequest = (
  tools: ReadonlyMap<string, Tool<McpTasks>>,
  method: string,
  params: unknown,
  context: CallContext
) => auditedCall(tools, method, params, context, runTool(context))
