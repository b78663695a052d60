/**
 * Every tool call goes through one pipeline: check the arguments' depth → decode them → ask the confirm policy
 * (destructive tools only; no policy means no) → run with the tool's timeout → audit (fsynced,
 * or only written for a read-only call that succeeded).
 * It never throws: every outcome, including a defect in a handler, becomes a result.
 */
import { Cause, Clock, Duration, Effect, Either, Exit, Option } from "effect"
import type { StorageError } from "../domain/errors.js"
import { errorAnswer, okAnswer } from "../domain/mcpTask.js"
import { isoTime } from "../domain/Task.js"
import type { AuditStatus } from "../domain/audit.js"
import type { AuditDurability } from "../services/AuditLog.js"
import { AuditLog } from "../services/AuditLog.js"
import { ConfirmPolicy } from "../services/ConfirmPolicy.js"
import type { ConfirmRequest, Decision } from "../services/ConfirmPolicy.js"
import { InvalidArguments, PermissionDenied, ToolTimeout, UnknownTool } from "./errors.js"
import type { AuditedArguments } from "./auditArguments.js"
import { auditedArguments, deeperThan } from "./auditArguments.js"
import { MaxArgumentDepth } from "./limits.js"
import { redactMessage } from "../domain/redact.js"
import type { PreparedCall, Tool, ToolContext, ToolFailure } from "./Tool.js"

/** What the transport knows about the call besides its arguments. */
export interface CallContext extends ToolContext {
  readonly server: string
  readonly ask: ConfirmRequest["ask"]
}

export interface ToolResult {
  readonly [key: string]: unknown
  readonly content: ReadonlyArray<{ readonly type: "text"; readonly text: string }>
  readonly structuredContent?: Record<string, unknown>
  readonly isError?: boolean
}

// An error may quote what it was given; what goes back is scrubbed like the audit entry.
export const errorResult = (error: ToolFailure): ToolResult => errorAnswer(error._tag, error.message)

export const okResult = (encoded: unknown): ToolResult =>
  okAnswer(
    encoded !== null && typeof encoded === "object" && !Array.isArray(encoded)
      ? { ...encoded }
      : { value: encoded }
  )

/** The entry's `arguments`, and `arguments_truncated` only when something was cut. */
const auditedFields = (audited: AuditedArguments) =>
  audited.truncated === undefined
    ? { arguments: audited.arguments }
    : { arguments: audited.arguments, arguments_truncated: audited.truncated }

export const noProgress: ToolContext["progress"] = () => Effect.void

/** A context for calls made in-process (tests, library users): no progress, nobody to ask. */
export const inProcessContext = (server: string): CallContext => ({
  server,
  progress: noProgress,
  ask: undefined
})

const confirm = (request: ConfirmRequest): Effect.Effect<Decision> =>
  Effect.flatMap(Effect.serviceOption(ConfirmPolicy), (policy) =>
    Option.match(policy, {
      onNone: () => Effect.succeed({ allowed: false, reason: "no confirmation policy is configured" }),
      onSome: (p) => p.confirm(request)
    })
  )

/** Append one audit entry for a call: what the pipeline writes, and what a task's run writes at its end. */
export type AuditOutcome = (
  status: AuditStatus,
  error: ToolFailure | undefined,
  options?: { readonly durability?: AuditDurability; readonly taskId?: string | undefined }
) => Effect.Effect<void, StorageError, AuditLog>

/**
 * What a call does once its arguments decoded and it was permitted: run the tool, or create a
 * task that runs it. Its success says how to audit it (the task it made, how durable the entry
 * must be before the answer).
 */
export type Perform<R, A> = (
  tool: Tool<R>,
  prepared: PreparedCall<R>,
  audit: AuditOutcome,
  /** The call's arguments as the audit log keeps them: redacted and bounded. */
  auditedArguments: unknown
) => Effect.Effect<Performed<A>, ToolFailure, R | AuditLog>

export interface Performed<A> {
  readonly value: A
  readonly taskId?: string | undefined
  readonly durability: AuditDurability
}

/** The tool's handler under its timeout. */
export const bounded = <R>(tool: Tool<R>, run: Effect.Effect<unknown, ToolFailure, R>) => {
  const timeout = tool.timeout
  return timeout === undefined
    ? run
    : Effect.timeoutFail(run, {
        duration: timeout,
        onTimeout: () => new ToolTimeout({ tool: tool.name, millis: Duration.toMillis(timeout) })
      })
}

/** The audit status of a failure, by its tag (a task's failure comes back from its record as data). */
export const statusOf = (failure: ToolFailure): AuditStatus =>
  failure._tag === "ToolTimeout" ? "timeout" : failure._tag === "InvalidArguments" ? "invalid" : "error"

/**
 * The pipeline: every call, whatever it asks for, is checked, permitted, performed and
 * audited; the answer is what `perform` made, or the failure that stopped it (`AuditFailed`
 * when its entry could not be written). It never fails: a defect in a handler becomes an
 * `InternalError`.
 */
export const auditedCall = <R, A>(
  tools: ReadonlyMap<string, Tool<R>>,
  name: string,
  args: unknown,
  context: CallContext,
  perform: Perform<R, A>,
  /** Refuses a call the tool does not take this way before its arguments are looked at (invalid). */
  admit: (tool: Tool<R>) => ToolFailure | undefined = () => undefined
): Effect.Effect<Either.Either<A, ToolFailure>, never, R | AuditLog> =>
  Effect.gen(function* () {
    const audit = yield* AuditLog
    const started = yield* Clock.currentTimeMillis
    // Bounded and redacted before anything else looks at them; deep arguments are not recursed into.
    const audited = auditedArguments(args ?? {})
    const record: AuditOutcome = (status, error, options = {}) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        audit.append(
          {
            time: isoTime(started),
            server: context.server,
            tool: name,
            status,
            duration_ms: now - started,
            ...auditedFields(audited),
            ...(options.taskId === undefined ? {} : { task_id: options.taskId }),
            error: error ? { tag: error._tag, message: redactMessage(error.message) } : null
          },
          { durability: options.durability ?? "synced" }
        )
      )
    /**
     * The answer goes back only once the call is audited: its entry fsynced, or, for a read-only
     * call that succeeded, written (its fsync follows at once; SECURITY.md states the rule). If
     * the entry cannot be written, the client is told so, rather than getting an answer that
     * left no trace.
     */
    const answer = (
      status: AuditStatus,
      error: ToolFailure | undefined,
      result: Either.Either<A, ToolFailure>,
      options?: Parameters<AuditOutcome>[2]
    ) =>
      record(status, error, options).pipe(
        Effect.as(result),
        Effect.catchAll((failure) =>
          Effect.as(
            Effect.logError(redactMessage(`audit append failed: ${failure.message}`)),
            Either.left<ToolFailure>({
              _tag: "AuditFailed",
              message: `the call ${status === "ok" ? "ran" : "ended"}, but could not be audited: ${failure.message}`
            })
          )
        )
      )
    const fail = (status: AuditStatus, error: ToolFailure) => answer(status, error, Either.left(error))

    const tool = tools.get(name)
    if (tool === undefined) return yield* fail("invalid", new UnknownTool({ tool: name }))
    const refused = admit(tool)
    if (refused !== undefined) return yield* fail("invalid", refused)
    if (deeperThan(args, MaxArgumentDepth))
      return yield* fail(
        "invalid",
        new InvalidArguments({
          tool: name,
          reason: `arguments: nested deeper than ${MaxArgumentDepth} levels`
        })
      )
    const prepared = yield* Effect.either(tool.prepare(args))
    if (prepared._tag === "Left") return yield* fail("invalid", prepared.left)

    if (tool.tier === "destructive") {
      const decision = yield* confirm({
        tool: name,
        tier: tool.tier,
        arguments: audited.arguments,
        ask: context.ask
      })
      if (!decision.allowed)
        return yield* fail("denied", new PermissionDenied({ tool: name, reason: decision.reason }))
    }

    const exit = yield* Effect.exit(perform(tool, prepared.right, record, audited.arguments))
    if (Exit.isSuccess(exit))
      return yield* answer("ok", undefined, Either.right(exit.value.value), {
        durability: exit.value.durability,
        taskId: exit.value.taskId
      })
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) return yield* fail(statusOf(failure.value), failure.value)
    yield* Effect.logError(`tool ${name} died`, exit.cause)
    return yield* fail("error", {
      _tag: "InternalError",
      message: "the tool failed unexpectedly; see the server log"
    })
  }).pipe(
    // A call the client cancelled is audited too, as the error it became.
    Effect.onInterrupt(() =>
      Effect.flatMap(AuditLog, (audit) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          audit.append({
            time: isoTime(now),
            server: context.server,
            tool: name,
            status: "error",
            duration_ms: 0,
            ...auditedFields(auditedArguments(args ?? {})),
            error: { tag: "Cancelled", message: "the client cancelled the call" }
          })
        )
      ).pipe(Effect.ignore)
    ),
    Effect.withSpan("Pipeline.call", { attributes: { tool: name } })
  )

/**
 * Perform a call by running the tool under its timeout. Its entry is fsynced before the answer,
 * but only written for a read-only tool (its fsync follows at once).
 */
export const runTool =
  <R>(context: CallContext): Perform<R, unknown> =>
  (tool, prepared) =>
    Effect.map(bounded(tool, prepared(context)), (value) => ({
      value,
      durability: tool.tier === "read_only" ? ("written" as const) : ("synced" as const)
    }))

/** A tool call answered by running the tool: its result, or an error result `Tag: message`. */
export const callTool = <R>(
  tools: ReadonlyMap<string, Tool<R>>,
  name: string,
  args: unknown,
  context: CallContext
): Effect.Effect<ToolResult, never, R | AuditLog> =>
  Effect.map(
    auditedCall(tools, name, args, context, runTool(context)),
    Either.match({ onLeft: errorResult, onRight: okResult })
  )

/** Index tools by name; a duplicate name is a programming error. */
export const toolMap = <R>(tools: ReadonlyArray<Tool<R>>): ReadonlyMap<string, Tool<R>> => {
  const map = new Map<string, Tool<R>>()
  for (const tool of tools) {
    if (map.has(tool.name)) throw new Error(`two tools named ${tool.name}`)
    map.set(tool.name, tool)
  }
  return map
}
