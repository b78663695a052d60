/**
 * The MCP adapter: a low-level SDK `Server` whose tools/list and tools/call handlers run the
 * pipeline. (The SDK's `registerTool` takes zod schemas; we have Effect Schemas, so the
 * JSON Schemas are generated from them and served through the low-level handlers.)
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type { ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import { Effect, Runtime } from "effect"
import type { AuditLog } from "../services/AuditLog.js"
import { argumentsAsSent } from "./jsonRpcMessage.js"
import type { CallContext } from "./pipeline.js"
import { callTool, toolMap } from "./pipeline.js"
import type { Tool } from "./Tool.js"

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
    }
  }
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

/** Build an SDK server whose handlers run the pipeline in the current Effect context. */
export const makeMcpServer = <R>(spec: ServerSpec<R>) =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<R | AuditLog>()
    const tools = toolMap(spec.tools)
    const server = new Server(
      { name: spec.name, version: spec.version },
      { capabilities: { tools: {} }, instructions: spec.instructions }
    )
    server.setRequestHandler(ListToolsRequestSchema, () =>
      Promise.resolve({ tools: spec.tools.map(describeTool) })
    )
    const inFlight = new Set<Promise<unknown>>()
    server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
      const call = Runtime.runPromise(runtime)(
        callTool(
          tools,
          request.params.name,
          argumentsAsSent(request.params.arguments),
          callContext(server, spec.name, request.params._meta?.progressToken, extra)
        ),
        { signal: extra.signal }
      )
      inFlight.add(call)
      void call.finally(() => inFlight.delete(call)).catch(() => undefined)
      return call
    })
    /** Settles once every call received so far has been answered (or failed). */
    const drain = Effect.promise(() => Promise.allSettled([...inFlight]))
    return { server, drain }
  })
