/**
 * RelayKeep tasks as MCP tasks (protocol revision 2025-11-25): the handle a client holds, the
 * status a record maps to, and the payload of a task that an MCP server runs itself. Pure.
 */
import { Either, Option, Schema } from "effect"
import { InvalidInput } from "./errors.js"
import type { PayloadSha256, TaskId } from "./ids.js"
import { isPayloadSha256, isTaskId } from "./ids.js"
import { redactMessage } from "./redact.js"
import type { RecordHead, TaskState, TaskView } from "./Task.js"
import { DefaultRetryPolicy, TaskView as TaskViewSchema } from "./Task.js"
import { WorkerLost } from "./transitions.js"

/**
 * The provider of a task that an MCP server runs in its own process (a toolkit tool called as a
 * task). No worker claims it: a worker gives it no room, and only the server that submitted it
 * claims it, at once, by id.
 */
export const InProcessProvider = "mcp-tool"

/**
 * The provider of a broadcast's group record (domain/broadcast.ts): the record names the
 * members and is settled by the submitter, so no worker claims it either.
 */
export const BroadcastProvider = "broadcast"

/** Providers no worker runs and no client may name: each with what it is reserved for. */
export const ReservedProviders: ReadonlyMap<string, string> = new Map([
  [InProcessProvider, "the tasks an MCP server runs itself"],
  [BroadcastProvider, "the group record of a broadcast (submit it with --broadcast or the broadcast tool)"]
])

/**
 * A payload a client may submit: not one naming a reserved provider, which no worker would
 * ever run (only a server or a broadcast submits those, for the records they settle themselves).
 */
export const checkSubmittable = (
  payload: { readonly [key: string]: unknown },
  field = "payload"
): Either.Either<void, InvalidInput> => {
  const provider = payload["provider"]
  const reservedFor = typeof provider === "string" ? ReservedProviders.get(provider) : undefined
  return reservedFor === undefined
    ? Either.void
    : Either.left(new InvalidInput({ field, reason: `provider: ${provider} is reserved for ${reservedFor}` }))
}

/**
 * The start of a broadcast member's request id (`broadcast:<group task id>:<n>`,
 * domain/broadcast.ts). Only a broadcast makes such ids: a client that could take one first would
 * make the broadcast that derives it fail with ConflictError.
 */
export const MemberRequestPrefix = "broadcast:"

/** A request id a client may choose: any but a broadcast member's. */
export const checkRequestId = (
  clientRequestId: string,
  field = "client_request_id"
): Either.Either<void, InvalidInput> =>
  clientRequestId.startsWith(MemberRequestPrefix)
    ? Either.left(
        new InvalidInput({
          field,
          reason: `must not start with ${MemberRequestPrefix}, which is reserved for the members of a broadcast`
        })
      )
    : Either.void

/** The payload of such a task: which server and tool, and the call's arguments, redacted. */
export const InProcessPayload = Schema.Struct({
  provider: Schema.Literal(InProcessProvider),
  server: Schema.String,
  tool: Schema.String,
  arguments: Schema.Unknown
})
export type InProcessPayload = typeof InProcessPayload.Type
export const isInProcessPayload = Schema.is(InProcessPayload)

/** What an MCP client holds: the task id and the payload's hash, so holding it is holding the receipt. */
export interface TaskHandle {
  readonly taskId: TaskId
  readonly payloadSha256: PayloadSha256
}

const HandlePrefix = "rk1-"

export const formatHandle = (handle: TaskHandle): string =>
  `${HandlePrefix}${handle.taskId}-${handle.payloadSha256}`

/** The handle a string spells, or none when it is not one this format makes. */
export const parseHandle = (text: string): Option.Option<TaskHandle> => {
  if (!text.startsWith(HandlePrefix) || text.length !== HandlePrefix.length + 64 + 1 + 64)
    return Option.none()
  const taskId = text.slice(HandlePrefix.length, HandlePrefix.length + 64)
  const payloadSha256 = text.slice(HandlePrefix.length + 65)
  return text[HandlePrefix.length + 64] === "-" && isTaskId(taskId) && isPayloadSha256(payloadSha256)
    ? Option.some({ taskId, payloadSha256 })
    : Option.none()
}

export const McpTaskStatus = Schema.Literal("working", "input_required", "completed", "failed", "cancelled")
export type McpTaskStatus = typeof McpTaskStatus.Type

/** An MCP `Task`, as `tasks/get`, `tasks/list`, `tasks/cancel` and a created task carry it. */
export const McpTask = Schema.Struct({
  taskId: Schema.String.annotations({
    description: "The task's handle: it names the RelayKeep task and its payload's hash, like a receipt"
  }),
  status: McpTaskStatus.annotations({ description: "working, completed, failed or cancelled" }),
  statusMessage: Schema.String.annotations({
    description: "What the task is doing or why it ended: its attempt, who runs it, its error"
  }),
  createdAt: Schema.String.annotations({ description: "When the task was created (ISO-8601 UTC)" }),
  lastUpdatedAt: Schema.String.annotations({ description: "When the task last changed (ISO-8601 UTC)" }),
  ttl: Schema.NullOr(Schema.Number).annotations({
    description: "How long the finished task is kept at least, in milliseconds; null: until removed"
  }),
  pollInterval: Schema.optionalWith(
    Schema.Number.annotations({ description: "How often to poll a working task, in milliseconds" }),
    { exact: true }
  )
})
export type McpTask = typeof McpTask.Type

export const mcpStatusOf = (state: TaskState): McpTaskStatus => {
  switch (state) {
    case "queued":
    case "running":
      return "working"
    case "complete":
      return "completed"
    case "failed":
      return "failed"
    case "cancelled":
      return "cancelled"
  }
}

/** How often a client should poll a task still working, in milliseconds. */
export const PollIntervalMillis = 1_000

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`

/**
 * What the status says in words: the attempt and who runs it, the retry due time, why it
 * failed. `inProcess` tasks are run by an MCP server, not a worker, and a lost one was
 * interrupted by that server's end.
 */
export const statusMessageOf = (head: RecordHead, inProcess: boolean): string => {
  const maxAttempts = (head.retry ?? DefaultRetryPolicy).max_attempts
  switch (head.state) {
    case "queued": {
      if (head.attempt === 0) return inProcess ? "starting in the server" : "queued: waiting for a worker"
      const last = head.attempts.at(-1)?.error
      const due = head.not_before === undefined ? "as soon as a worker is free" : `at ${head.not_before}`
      return `queued for attempt ${head.attempt + 1} of ${maxAttempts}, due ${due}${last ? ` (attempt ${head.attempt} failed: ${last.tag})` : ""}`
    }
    case "running": {
      const holder =
        head.lease === null ? "" : ` on ${inProcess ? "server" : "worker"} ${head.lease.worker_id}`
      const cancel =
        head.cancel_requested_at === undefined ? "" : `; cancel requested at ${head.cancel_requested_at}`
      return inProcess
        ? `running${holder}${cancel}`
        : `running attempt ${head.attempt} of ${maxAttempts}${holder}${cancel}`
    }
    case "complete":
      return inProcess ? "completed" : `completed after ${plural(head.attempt, "attempt")}`
    case "failed": {
      const error = head.error
      if (error === null) return "failed"
      if (inProcess && error.tag === WorkerLost)
        return `failed: interrupted: the server running it stopped before it finished (${error.message})`
      return `failed: ${error.tag}: ${error.message}`
    }
    case "cancelled":
      return "cancelled"
  }
}

/** The MCP task a record is, under the handle that names it. */
export const toMcpTask = (head: RecordHead, inProcess: boolean): McpTask => {
  const status = mcpStatusOf(head.state)
  return {
    taskId: formatHandle({ taskId: head.task_id, payloadSha256: head.payload_sha256 }),
    status,
    statusMessage: statusMessageOf(head, inProcess),
    createdAt: head.created_at,
    lastUpdatedAt: head.updated_at,
    ttl: head.ttl_ms ?? null,
    ...(status === "working" ? { pollInterval: PollIntervalMillis } : {})
  }
}

/** A `tools/call` result as RelayKeep's servers answer one, and as an in-server task keeps it. */
export const McpToolResult = Schema.Struct({
  content: Schema.Array(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })).annotations({
    description: "The answer as text"
  }),
  structuredContent: Schema.optionalWith(
    Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
      description: "The answer as JSON, when the tool gives one"
    }),
    { exact: true }
  ),
  isError: Schema.optionalWith(Schema.Boolean.annotations({ description: "true when the task failed" }), {
    exact: true
  })
})
export type McpToolResult = typeof McpToolResult.Type

/** What an in-server task ended with, as its runner reports it. */
export type InServerOutcome =
  | { readonly _tag: "complete"; readonly result: McpToolResult }
  | { readonly _tag: "failed"; readonly error: { readonly tag: string; readonly message: string } }

/** An error answer as every RelayKeep tool gives one: `Tag: message`, scrubbed like an audit entry. */
export const errorAnswer = (tag: string, message: string): McpToolResult => ({
  content: [{ type: "text", text: redactMessage(`${tag}: ${message}`) }],
  isError: true
})

/** A success answer: the JSON object as structuredContent, and the same JSON as its text. */
export const okAnswer = (structured: { readonly [key: string]: unknown }): McpToolResult => ({
  content: [{ type: "text", text: JSON.stringify(structured) }],
  structuredContent: { ...structured }
})

const isToolResult = Schema.is(McpToolResult)
const encodeView = Schema.encodeSync(TaskViewSchema)

/**
 * What `tasks/result` answers for a finished task. A task a server ran itself answers with the
 * result its tool produced, kept as it was; a task a worker ran (a `submit` called as a task)
 * answers with the task as `read` shows it. A failure is an error answer with the task's error,
 * a cancelled task one tagged `Cancelled`.
 */
export const taskAnswer = (view: TaskView, inServer: boolean): McpToolResult => {
  switch (view.state) {
    case "complete":
      if (!inServer) return okAnswer(encodeView(view))
      return isToolResult(view.result)
        ? view.result
        : errorAnswer("InvalidRecord", `task ${view.task_id} holds a result that is not a tool result`)
    case "failed":
      return view.error === null
        ? errorAnswer("TaskFailed", `task ${view.task_id} failed`)
        : errorAnswer(view.error.tag, view.error.message)
    case "cancelled":
      return errorAnswer("Cancelled", `task ${view.task_id} was cancelled before it finished`)
    case "queued":
    case "running":
      return errorAnswer("TaskNotFinished", `task ${view.task_id} is still ${view.state}`)
  }
}

/** How an in-server task's run ended, as whoever audits it is told once the end is written. */
export type InServerEnd =
  | InServerOutcome
  | { readonly _tag: "cancelled" }
  /** The server stopped first; the task was failed as interrupted. */
  | { readonly _tag: "interrupted" }
  /** Another process ended the task first (it found this server gone); nothing was written. */
  | { readonly _tag: "lost" }
  /** The outcome could not be written (the storage kept failing); the task ends as interrupted later. */
  | { readonly _tag: "unwritten"; readonly reason: string }
