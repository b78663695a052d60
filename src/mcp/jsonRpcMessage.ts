/**
 * One line from an MCP client, as a JSON-RPC message we accept, or the error to answer it with.
 * Read with our parser (json.ts): strict UTF-8, no duplicate keys, numbers a double holds,
 * bounded depth. The arguments of a `tools/call` are handed on exactly as sent (see
 * `wrapArguments`), so the pipeline judges what the client wrote.
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { ErrorCode, JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js"
import { Either, Predicate } from "effect"
import { describeJsonError, jsonPathText, parseJsonWith } from "../domain/json.js"
import type { RequestId } from "./lineFraming.js"
import { recoverRequestId } from "./lineFraming.js"
import { MaxMessageBytes, MaxMessageDepth } from "./limits.js"

/** An error to answer a line with: JSON-RPC's own codes, and the id when it could be read. */
export interface Refusal {
  readonly id: RequestId | null
  readonly code: number
  readonly message: string
}

/**
 * The key under which the transport hands on a call's arguments. The SDK validates a
 * `tools/call` by rebuilding its `arguments` object, which drops a top-level `__proto__` key;
 * one level down, values pass through untouched. So the transport wraps the arguments as sent
 * in an object of this one key, and the handler unwraps them (`argumentsAsSent`).
 */
const SentArguments = "relaykeep/arguments-as-sent"

const wrapArguments = (message: unknown): unknown => {
  if (!Predicate.isRecord(message) || message["method"] !== "tools/call") return message
  const params = message["params"]
  if (!Predicate.isRecord(params) || !Predicate.isRecord(params["arguments"])) return message
  return { ...message, params: { ...params, arguments: { [SentArguments]: params["arguments"] } } }
}

/** The arguments of a call as the client sent them (as given, when not wrapped by our transport). */
export const argumentsAsSent = (args: Readonly<Record<string, unknown>> | undefined): unknown =>
  args !== undefined && Object.keys(args).length === 1 && Object.hasOwn(args, SentArguments)
    ? args[SentArguments]
    : args

const idOf = (message: unknown): RequestId | null => {
  const id = Predicate.isRecord(message) ? message["id"] : undefined
  return typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id)) ? id : null
}

const ends = (text: string) => recoverRequestId(text.slice(0, 512), text.slice(-512))

export const oversized = (bytes: number, id: RequestId | null): Refusal => ({
  id,
  code: ErrorCode.InvalidRequest,
  message: `Invalid Request: the message is ${bytes} bytes; the limit is ${MaxMessageBytes} bytes`
})

export const decodeMessage = (bytes: Buffer): Either.Either<JSONRPCMessage, Refusal> => {
  let text: string
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    const id = ends(bytes.toString("latin1"))
    return Either.left({
      id,
      code: ErrorCode.ParseError,
      message: "Parse error: the message is not valid UTF-8"
    })
  }
  const parsed = parseJsonWith(text, { maxDepth: MaxMessageDepth, elide: true })
  if (Either.isLeft(parsed))
    return Either.left({
      id: ends(text),
      code: ErrorCode.ParseError,
      message: `Parse error: ${describeJsonError(parsed.left)}`
    })
  const { value, elided } = parsed.right
  const id = idOf(value)
  // Only a call's arguments may be too deep: the pipeline refuses them as a tool error, audited.
  const misplaced = elided.find(
    (path) =>
      !(path[0] === "params" && path[1] === "arguments") ||
      !Predicate.isRecord(value) ||
      value["method"] !== "tools/call"
  )
  if (misplaced !== undefined)
    return Either.left({
      id,
      code: ErrorCode.InvalidRequest,
      message: `Invalid Request: ${jsonPathText(misplaced)}: nested deeper than ${MaxMessageDepth} levels`
    })
  const message = JSONRPCMessageSchema.safeParse(wrapArguments(value))
  if (!message.success)
    return Either.left({
      id,
      code: ErrorCode.InvalidRequest,
      message: "Invalid Request: not a JSON-RPC 2.0 message"
    })
  return Either.right(message.data)
}
