/**
 * A tool is a value: its name, what it takes and returns (as Effect Schemas, from which the
 * MCP JSON Schemas are generated), its permission tier, an optional timeout, and a handler.
 */
import type { Duration } from "effect"
import { Effect, JSONSchema, Predicate, Schema, SchemaAST } from "effect"
import { InvalidInput } from "../domain/errors.js"
import type { Tier } from "../domain/tier.js"
import { describeParseError } from "../domain/input.js"
import { InvalidArguments } from "./errors.js"

export type { Tier }

/** What a running handler may do besides computing its answer. */
export interface ToolContext {
  /** Report progress to the client, when it asked for it (a no-op otherwise). */
  readonly progress: (progress: number, total?: number, message?: string) => Effect.Effect<void>
  /**
   * Present when the client called the tool as an MCP task: how long it asked for the finished
   * task to be kept (milliseconds; null for no limit).
   */
  readonly task?: { readonly ttl: number | null } | undefined
}

/**
 * Whether a client may call a tool as an MCP task (the tool's `execution.taskSupport`): never
 * (the default), when it asks, or only so.
 */
export type TaskSupport = "forbidden" | "optional" | "required"

/** A failure a handler reports to the client: its tag and message become the error result. */
export interface ToolFailure {
  readonly _tag: string
  readonly message: string
}

export interface ToolSpec<I, II, O, OI, E extends ToolFailure, R> {
  readonly name: string
  readonly description: string
  readonly input: Schema.Schema<I, II>
  /** The answer; encoded, it is the result's structuredContent, so it must be an object. */
  readonly output: Schema.Schema<O, OI>
  readonly tier: Tier
  /** Calling twice with the same arguments has no further effect (default: true for read_only). */
  readonly idempotent?: boolean
  /** The tool reaches beyond this machine's RelayKeep data (default: false). */
  readonly openWorld?: boolean
  readonly timeout?: Duration.DurationInput
  /**
   * Whether a client may call it as an MCP task (default: forbidden). Called as a task, the
   * handler runs in the server's background under a task kept in the queue's store (a server
   * needs `McpTasks` for that), with the tool's timeout; the client polls `tasks/get` and
   * fetches the answer with `tasks/result`, from this server process or a later one.
   */
  readonly taskSupport?: TaskSupport
  /**
   * The handler's answer is the receipt of a task it queued for a worker (`submit`). Called as
   * an MCP task, that queued task is the MCP task: `tasks/result` answers with its outcome.
   */
  readonly queuedTask?: boolean
  readonly handler: (input: I, context: ToolContext) => Effect.Effect<O, E, R>
}

/** A call whose arguments decoded: ready to run, its answer already encoded to JSON. */
export type PreparedCall<R> = (context: ToolContext) => Effect.Effect<unknown, ToolFailure, R>

/** A tool with its types sealed inside, so tools of different shapes fit in one list. */
export interface Tool<R> {
  readonly name: string
  readonly description: string
  readonly tier: Tier
  readonly idempotent: boolean
  readonly openWorld: boolean
  readonly timeout: Duration.DurationInput | undefined
  readonly taskSupport: TaskSupport
  readonly queuedTask: boolean
  readonly inputJsonSchema: JSONSchema.JsonSchema7Root
  readonly outputJsonSchema: JSONSchema.JsonSchema7Root
  /**
   * Decode raw arguments; unknown, missing or ill-typed fields fail naming the field. The
   * prepared call fails with `InvalidArguments` too when its handler finds an argument wrong
   * (`InvalidInput` from a store).
   */
  readonly prepare: (args: unknown) => Effect.Effect<PreparedCall<R>, InvalidArguments>
}

/**
 * The keys an object input allows, when it is a plain struct (looked up on its encoded side,
 * so defaults and other transformations do not hide it). Schema's excess-property check
 * does not apply to a struct without fields (`{}` accepts any object), so the pipeline closes
 * such inputs itself: a call with junk arguments must never reach a confirmation step.
 */
const closedKeysOf = (ast: SchemaAST.AST): ReadonlySet<string> | undefined =>
  SchemaAST.isTypeLiteral(ast) && ast.indexSignatures.length === 0
    ? new Set(ast.propertySignatures.map((signature) => String(signature.name)))
    : undefined

const checkClosed = (tool: string, keys: ReadonlySet<string> | undefined, args: unknown) => {
  if (keys === undefined) return Effect.void
  if (!Predicate.isRecord(args)) {
    return Effect.fail(new InvalidArguments({ tool, reason: "arguments must be an object" }))
  }
  const extra = Object.keys(args).find((key) => !keys.has(key))
  return extra === undefined
    ? Effect.void
    : Effect.fail(new InvalidArguments({ tool, reason: `${extra}: is unexpected` }))
}

export const defineTool = <I, II, O, OI, E extends ToolFailure, R>(
  spec: ToolSpec<I, II, O, OI, E, R>
): Tool<R> => {
  const decode = Schema.decodeUnknown(spec.input, { errors: "first", onExcessProperty: "error" })
  const encode = Schema.encode(spec.output)
  const closedKeys = closedKeysOf(SchemaAST.encodedAST(spec.input.ast))
  return {
    name: spec.name,
    description: spec.description,
    tier: spec.tier,
    idempotent: spec.idempotent ?? spec.tier === "read_only",
    openWorld: spec.openWorld ?? false,
    timeout: spec.timeout,
    taskSupport: spec.taskSupport ?? "forbidden",
    queuedTask: spec.queuedTask ?? false,
    inputJsonSchema: JSONSchema.make(spec.input),
    outputJsonSchema: JSONSchema.make(spec.output),
    prepare: (args) =>
      Effect.zipRight(
        checkClosed(spec.name, closedKeys, args ?? {}),
        decode(args ?? {}).pipe(
          Effect.mapError(
            (error) => new InvalidArguments({ tool: spec.name, reason: describeParseError(error) })
          )
        )
      ).pipe(
        Effect.map(
          (input): PreparedCall<R> =>
            (context) =>
              spec.handler(input, context).pipe(
                // An argument only the store can judge (a payload over its size limit, a cursor)
                // is still the caller's argument: the same tag as every other argument error.
                Effect.mapError((error) =>
                  error instanceof InvalidInput
                    ? new InvalidArguments({ tool: spec.name, reason: error.message })
                    : error
                ),
                Effect.flatMap(
                  (output) => Effect.orDie(encode(output)) // our own output failing our own schema is a bug
                )
              )
        )
      )
  }
}
