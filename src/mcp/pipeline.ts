/**
 * Every tool call goes through one pipeline: check the arguments' depth → decode them → ask the confirm policy
 * (destructive tools only; no policy means no) → run with the tool's timeout → audit (fsynced,
 * or only written for a read-only call that succeeded).
 * It never throws: every outcome, including a defect in a handler, becomes a result.
 */
import { Cause, Clock, Duration, Effect, Exit, Option } from "effect"
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
import type { Tool, ToolContext, ToolFailure } from "./Tool.js"

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

const errorResult = (error: ToolFailure): ToolResult => ({
  // An error may quote what it was given; what goes back is scrubbed like the audit entry.
  content: [{ type: "text", text: redactMessage(`${error._tag}: ${error.message}`) }],
  isError: true
})

const okResult = (encoded: unknown): ToolResult => {
  const structured: Record<string, unknown> =
    encoded !== null && typeof encoded === "object" && !Array.isArray(encoded)
      ? { ...encoded }
      : { value: encoded }
  return { content: [{ type: "text", text: JSON.stringify(structured) }], structuredContent: structured }
}

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

export const callTool = <R>(
  tools: ReadonlyMap<string, Tool<R>>,
  name: string,
  args: unknown,
  context: CallContext
): Effect.Effect<ToolResult, never, R | AuditLog> =>
  Effect.gen(function* () {
    const audit = yield* AuditLog
    const started = yield* Clock.currentTimeMillis
    // Bounded and redacted before anything else looks at them; deep arguments are not recursed into.
    const audited = auditedArguments(args ?? {})
    const record = (status: AuditStatus, error: ToolFailure | undefined, durability: AuditDurability) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        audit.append(
          {
            time: isoTime(started),
            server: context.server,
            tool: name,
            status,
            duration_ms: now - started,
            ...auditedFields(audited),
            error: error ? { tag: error._tag, message: redactMessage(error.message) } : null
          },
          { durability }
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
      result: ToolResult,
      durability: AuditDurability = "synced"
    ) =>
      record(status, error, durability).pipe(
        Effect.as(result),
        Effect.catchAll((failure) =>
          Effect.as(
            Effect.logError(redactMessage(`audit append failed: ${failure.message}`)),
            errorResult({
              _tag: "AuditFailed",
              message: redactMessage(
                `the call ${status === "ok" ? "ran" : "ended"}, but could not be audited: ${failure.message}`
              )
            })
          )
        )
      )
    const fail = (status: AuditStatus, error: ToolFailure) => answer(status, error, errorResult(error))

    const tool = tools.get(name)
    if (tool === undefined) return yield* fail("invalid", new UnknownTool({ tool: name }))
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

    const run = prepared.right(context)
    const timeout = tool.timeout
    const bounded =
      timeout === undefined
        ? run
        : Effect.timeoutFail(run, {
            duration: timeout,
            onTimeout: () => new ToolTimeout({ tool: name, millis: Duration.toMillis(timeout) })
          })
    const exit = yield* Effect.exit(bounded)
    if (Exit.isSuccess(exit))
      return yield* answer(
        "ok",
        undefined,
        okResult(exit.value),
        tool.tier === "read_only" ? "written" : "synced"
      )
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) {
      const status: AuditStatus =
        failure.value instanceof ToolTimeout
          ? "timeout"
          : failure.value instanceof InvalidArguments
            ? "invalid"
            : "error"
      return yield* fail(status, failure.value)
    }
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

/** Index tools by name; a duplicate name is a programming error. */
export const toolMap = <R>(tools: ReadonlyArray<Tool<R>>): ReadonlyMap<string, Tool<R>> => {
  const map = new Map<string, Tool<R>>()
  for (const tool of tools) {
    if (map.has(tool.name)) throw new Error(`two tools named ${tool.name}`)
    map.set(tool.name, tool)
  }
  return map
}
