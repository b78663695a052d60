/**
 * The MCP SDK's task-store interface (`experimental.tasks`, a pluggable store whose only
 * implementation in the SDK keeps tasks in memory) on RelayKeep's durable queue: a server built
 * with the SDK's own `McpServer` and `registerToolTask` keeps its tasks across restarts by passing
 * `taskStore: yield* makeDurableTaskStore(name)`. Each task is an in-server task of `McpTasks`:
 * heartbeated while the tool works, its result kept in the queue's store, failed as interrupted
 * when the server ends first. Task ids are RelayKeep handles, valid in any later process.
 */
import type {
  CreateTaskOptions,
  TaskStore as SdkTaskStore
} from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js"
import type { Request, RequestId, Result, Task } from "@modelcontextprotocol/sdk/types.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Either, Runtime, Schema } from "effect"
import type { InServerOutcome } from "../domain/mcpTask.js"
import { McpToolResult } from "../domain/mcpTask.js"
import { McpTasks } from "../services/McpTasks.js"
import { auditedArguments } from "./auditArguments.js"

/** The text of a result, for the error of a failed task (its first 1,000 characters are kept). */
const textOf = (result: Result): string => {
  const decoded = Schema.decodeUnknownEither(McpToolResult)(result)
  return Either.isRight(decoded)
    ? decoded.right.content.map((block) => block.text).join("\n")
    : JSON.stringify(result)
}

const asToolResult = (result: Result): McpToolResult =>
  Either.getOrElse(Schema.decodeUnknownEither(McpToolResult)(result), () => ({
    content: [{ type: "text" as const, text: JSON.stringify(result) }]
  }))

/** Lookups the SDK expects to answer "none" rather than fail. */
const NotFound = new Set(["InvalidInput", "UnknownTask", "HashMismatch"])
/** Failures that are the caller's, answered as invalid params; the rest are internal errors. */
const Refusals = new Set([...NotFound, "TaskFinished", "NotHeldHere"])

/**
 * A durable `TaskStore` for the SDK, for the server named `server`. Built in an Effect that has
 * `McpTasks`; its methods run on that runtime. Sessions share every task (the handle is the
 * capability), as RelayKeep's own servers do.
 */
export const makeDurableTaskStore = (server: string): Effect.Effect<SdkTaskStore, never, McpTasks> =>
  Effect.gen(function* () {
    const tasks = yield* McpTasks
    const runtime = yield* Effect.runtime<never>()
    /** Run on the runtime; a failure rejects with the McpError itself, as the SDK's handlers expect. */
    const run = <A, E extends { readonly _tag: string; readonly message: string }>(
      effect: Effect.Effect<A, E>
    ) =>
      Runtime.runPromise(runtime)(Effect.either(effect)).then(
        Either.getOrThrowWith(
          (error) =>
            new McpError(
              Refusals.has(error._tag) ? ErrorCode.InvalidParams : ErrorCode.InternalError,
              `${error._tag}: ${error.message}`
            )
        )
      )
    const get = (taskId: string) =>
      Effect.catchIf(
        tasks.get(taskId),
        (error) => NotFound.has(error._tag),
        () => Effect.succeed(null)
      )
    const settle = (taskId: string, outcome: InServerOutcome | { readonly _tag: "cancelled" }) =>
      run(tasks.settle(taskId, outcome))

    return {
      createTask: (taskParams: CreateTaskOptions, _requestId: RequestId, request: Request): Promise<Task> => {
        const tool = typeof request.params?.["name"] === "string" ? request.params["name"] : request.method
        const args = request.params?.["arguments"]
        return run(
          tasks.hold({
            server,
            tool,
            arguments: auditedArguments(args ?? {}).arguments,
            ttl: taskParams.ttl ?? null
          })
        )
      },
      getTask: (taskId: string) => run(get(taskId)),
      storeTaskResult: (taskId: string, status: "completed" | "failed", result: Result) =>
        settle(
          taskId,
          status === "completed"
            ? { _tag: "complete", result: asToolResult(result) }
            : { _tag: "failed", error: { tag: "ToolError", message: textOf(result) } }
        ),
      getTaskResult: (taskId: string) => run(tasks.result(taskId, () => Effect.void)),
      updateTaskStatus: (taskId: string, status: Task["status"], statusMessage?: string) => {
        switch (status) {
          case "cancelled":
            // Asked for in the record, so whichever server process holds the task stops it.
            return run(Effect.asVoid(tasks.cancel(taskId)))
          case "failed":
            return settle(taskId, {
              _tag: "failed",
              error: { tag: "ToolError", message: statusMessage ?? "the tool failed" }
            })
          case "completed":
            return settle(taskId, { _tag: "complete", result: { content: [] } })
          case "working":
          case "input_required":
            // The queue's states say "running" for both; the task goes on as it was.
            return run(Effect.asVoid(tasks.get(taskId)))
        }
      },
      listTasks: (cursor?: string) =>
        run(
          Effect.map(tasks.list(cursor), (page) =>
            page.nextCursor === undefined
              ? { tasks: [...page.tasks] }
              : { tasks: [...page.tasks], nextCursor: page.nextCursor }
          )
        )
    }
  })
