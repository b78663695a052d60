/**
 * The MCP adapter: a low-level SDK `Server` whose tools/list and tools/call handlers run the
 * pipeline. (The SDK's `registerTool` takes zod schemas; we have Effect Schemas, so the
 * JSON Schemas are generated from them and served through the low-level handlers.)
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  CallToolResultSchema,
  CancelTaskRequestSchema,
  CancelTaskResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  GetTaskResultSchema,
  ListTasksRequestSchema,
  ListTasksResultSchema,
  ListToolsRequestSchema,
  RELATED_TASK_META_KEY
} from "@modelcontextprotocol/sdk/types.js"
import type { ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import type { Scope } from "effect"
import { Deferred, Effect, Either, Option, Runtime, Schedule, Stream } from "effect"
import { redactMessage } from "../domain/redact.js"
import type { AuditLog } from "../services/AuditLog.js"
import { McpTasks } from "../services/McpTasks.js"
import { argumentsAsSent } from "./jsonRpcMessage.js"
import type { CallContext } from "./pipeline.js"
import { auditedCall, errorResult, okResult, runTool, toolMap } from "./pipeline.js"
import {
  admitTaskSupport,
  performAsTask,
  TaskSupportMismatch,
  taskRequest,
  taskRequestTools
} from "./taskCalls.js"
import type { Tool, ToolFailure } from "./Tool.js"

export interface ServerSpec<R> {
  readonly name: string
  readonly version: string
  /** Told to the client at initialization: the rules of using these tools. */
  readonly instructions: string
  readonly tools: ReadonlyArray<Tool<R>>
}

/**
 * A JSON Schema without `$schema` and `$id` keys. Effect marks every `unknown` as
 * `$id: "/schemas/unknown"`; a schema holding several of them is rejected by validators such
 * as Ajv (the SDK client's), since one `$id` would name several places.
 */
const withoutIds = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(withoutIds)
  if (value === null || typeof value !== "object") return value
  return Object.fromEntries(
    Object.entries(value).flatMap(([key, member]) =>
      key === "$id" || key === "$schema" ? [] : [[key, withoutIds(member)]]
    )
  )
}

const objectSchema = (schema: unknown): { readonly type: "object"; readonly [key: string]: unknown } => {
  const cleaned = withoutIds(schema)
  return { ...(cleaned !== null && typeof cleaned === "object" ? cleaned : {}), type: "object" }
}

/** The tools/list entry of a tool: schemas from its Effect Schemas, hints from its tier. */
export const describeTool = <R>(tool: Tool<R>) => {
  const inputSchema = objectSchema(tool.inputJsonSchema)
  const outputSchema = objectSchema(tool.outputJsonSchema)
  return {
    name: tool.name,
    description: tool.description,
    inputSchema,
    outputSchema,
    annotations: {
      readOnlyHint: tool.tier === "read_only",
      destructiveHint: tool.tier === "destructive",
      idempotentHint: tool.idempotent,
      openWorldHint: tool.openWorld
    },
    ...(tool.taskSupport === "forbidden" ? {} : { execution: { taskSupport: tool.taskSupport } })
  }
}

/**
 * A JSON-RPC error as the SDK sends one: its `code`, and the message as it is (an `McpError`
 * would send its message with "MCP error N: " before it, which the client prefixes again).
 */
class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string
  ) {
    super(message)
  }
}

/** Refusals of what the caller sent or may do: invalid params; anything else is an internal error. */
const CallersErrors = new Set([
  "InvalidArguments",
  "UnknownTool",
  "UnknownTask",
  "HashMismatch",
  "TaskFinished",
  "ConflictError",
  "PermissionDenied"
])

/** The JSON-RPC error a refused task request is answered with: its code, and `Tag: message`. */
const rpcError = (error: ToolFailure): RpcError => {
  const code =
    error instanceof TaskSupportMismatch
      ? ErrorCode.MethodNotFound
      : CallersErrors.has(error._tag)
        ? ErrorCode.InvalidParams
        : ErrorCode.InternalError
  return new RpcError(code, redactMessage(`${error._tag}: ${error.message}`))
}

/** The value, or the JSON-RPC error the failure is. */
const orRpcError = <A>(result: Either.Either<A, ToolFailure>): A => Either.getOrThrowWith(result, rpcError)

/** A request's params without `_meta` (a progress token, a related task), which are not arguments. */
const withoutMeta = (params: { readonly [key: string]: unknown } | undefined): Record<string, unknown> => {
  const { _meta, ...rest } = params ?? {}
  void _meta
  return rest
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>

const callContext = (
  server: Server,
  name: string,
  progressToken: string | number | undefined,
  extra: Extra
): CallContext => {
  const canAsk = server.getClientCapabilities()?.elicitation !== undefined
  return {
    server: name,
    progress: (progress, total, message) =>
      progressToken === undefined
        ? Effect.void
        : Effect.promise(() =>
            extra.sendNotification({
              method: "notifications/progress",
              params: {
                progressToken,
                progress,
                ...(total === undefined ? {} : { total }),
                ...(message === undefined ? {} : { message })
              }
            })
          ).pipe(Effect.ignore),
    ask: canAsk
      ? (message) =>
          Effect.tryPromise(() =>
            server.elicitInput({
              message,
              requestedSchema: {
                type: "object",
                properties: { allow: { type: "boolean", title: "Allow this call?" } },
                required: ["allow"]
              }
            })
          ).pipe(
            Effect.map((answer) => answer.action === "accept" && answer.content?.["allow"] === true),
            Effect.orElseSucceed(() => false)
          )
      : undefined
  }
}

/**
 * Build an SDK server whose handlers run the pipeline in the current Effect context. A server
 * with a tool that can run as a task advertises the `tasks` capability and answers the
 * `tasks/*` requests through `McpTasks`, which it then needs in context; while it is connected,
 * it sends `notifications/tasks/status` when a task it made or was asked about changes.
 */
export const makeMcpServer = <R>(spec: ServerSpec<R>) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<R | AuditLog>()
    const tools = toolMap(spec.tools)
    const taskTool = spec.tools.find((tool) => tool.taskSupport !== "forbidden")
    const tasks = yield* Effect.serviceOption(McpTasks)
    if (taskTool !== undefined && Option.isNone(tasks))
      return yield* Effect.dieMessage(
        `${spec.name}: the tool ${taskTool.name} can run as a task, so the server needs McpTasks (mcpTasksLayer)`
      )
    const withTasks = taskTool !== undefined
    const server = new Server(
      { name: spec.name, version: spec.version },
      {
        capabilities: {
          tools: {},
          ...(withTasks ? { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } } : {})
        },
        instructions: spec.instructions
      }
    )
    server.setRequestHandler(ListToolsRequestSchema, () =>
      Promise.resolve({ tools: spec.tools.map(describeTool) })
    )
    const inFlight = new Set<Promise<unknown>>()
    /** The calls that wait for a task to finish (`tasks/result`): stopped when the server ends. */
    const waits = new Set<AbortController>()
    const run = <A>(
      effect: Effect.Effect<A, never, R | AuditLog>,
      extra: Extra,
      options: { readonly waits?: boolean } = {}
    ): Promise<A> => {
      // Only a wait gets a signal of its own, which the end of the server aborts.
      const stop = options.waits === true ? new AbortController() : undefined
      if (stop !== undefined) waits.add(stop)
      const signal = stop === undefined ? extra.signal : AbortSignal.any([extra.signal, stop.signal])
      const call = Runtime.runPromise(runtime)(effect, { signal })
      inFlight.add(call)
      void call
        .finally(() => {
          inFlight.delete(call)
          if (stop !== undefined) waits.delete(stop)
        })
        .catch(() => undefined)
      return call
    }
    /** Task requests start the task notifications: a server never asked about tasks opens no store for them. */
    const tasksUsed = yield* Deferred.make<void>()
    const usingTasks = Deferred.succeed(tasksUsed, undefined)
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
      const { name, task } = request.params
      const context = callContext(server, spec.name, request.params._meta?.progressToken, extra)
      const args = argumentsAsSent(request.params.arguments)
      if (task !== undefined)
        return run(
          Effect.zipRight(
            usingTasks,
            auditedCall(
              tools,
              name,
              args,
              context,
              performAsTask(context, task.ttl ?? null),
              admitTaskSupport(true)
            )
          ),
          extra
        ).then((created) => CreateTaskResultSchema.parse({ task: orRpcError(created) }))
      return run(
        auditedCall(tools, name, args, context, runTool(context), admitTaskSupport(false)),
        extra
      ).then((result) =>
        Either.isLeft(result) && result.left instanceof TaskSupportMismatch
          ? Promise.reject(rpcError(result.left))
          : Either.match(result, { onLeft: errorResult, onRight: okResult })
      )
    })
    if (withTasks && Option.isSome(tasks)) {
      const engine = tasks.value
      const requests = toolMap(taskRequestTools)
      const answer = (
        method: string,
        params: { readonly [key: string]: unknown } | undefined,
        extra: Extra
      ) => {
        const progressToken = extra._meta?.progressToken
        const context = callContext(server, spec.name, progressToken, extra)
        return run(
          Effect.zipRight(
            usingTasks,
            Effect.provideService(
              taskRequest(requests, method, withoutMeta(params), context),
              McpTasks,
              engine
            )
          ),
          extra,
          { waits: method === "tasks/result" }
        ).then(orRpcError)
      }
      server.setRequestHandler(GetTaskRequestSchema, (request, extra) =>
        answer("tasks/get", request.params, extra).then((task) => GetTaskResultSchema.parse(task))
      )
      server.setRequestHandler(GetTaskPayloadRequestSchema, (request, extra) =>
        answer("tasks/result", request.params, extra).then((result) =>
          CallToolResultSchema.parse({
            ...Object(result),
            _meta: { [RELATED_TASK_META_KEY]: { taskId: request.params.taskId } }
          })
        )
      )
      server.setRequestHandler(ListTasksRequestSchema, (request, extra) =>
        answer("tasks/list", request.params, extra).then((page) => ListTasksResultSchema.parse(page))
      )
      server.setRequestHandler(CancelTaskRequestSchema, (request, extra) =>
        answer("tasks/cancel", request.params, extra).then((task) => CancelTaskResultSchema.parse(task))
      )
    }
    /**
     * Settles once every call received so far has been answered (or failed). A call waiting on a
     * task is stopped first (audited as cancelled): the client that would read its answer is gone,
     * and the task may take hours.
     */
    const drain = Effect.promise(() => {
      for (const stop of waits) stop.abort()
      return Promise.allSettled([...inFlight])
    })
    /**
     * While connected, tell the client of each change of a task it made or asked about, from
     * the first task request on (until then no store is opened for it). Runs until the scope
     * closes; a watch that ends (its store could not open yet) is started again a second later;
     * a notification that cannot be sent is dropped.
     */
    const notifyTaskChanges: Effect.Effect<void, never, Scope.Scope> = Option.match(tasks, {
      onNone: () => Effect.void,
      onSome: (found) =>
        Deferred.await(tasksUsed).pipe(
          Effect.zipRight(
            found.changes.pipe(
              Stream.runForEach((task) =>
                Effect.tryPromise(() =>
                  server.notification({ method: "notifications/tasks/status", params: task })
                ).pipe(Effect.ignore)
              ),
              Effect.repeat(Schedule.spaced("1 second"))
            )
          ),
          Effect.forkScoped,
          Effect.asVoid
        )
    })
    return { server, drain, notifyTaskChanges }
  })
