/**
 * Our stdio transport for the SDK's `Server`, in place of its StdioServerTransport: it reads
 * newline-delimited messages with our own parser (jsonRpcMessage.ts) and a size limit that is
 * answered, not fatal. The SDK's transport parses with JSON.parse (duplicate keys: last wins),
 * replaces invalid UTF-8, and closes the session on a line over 10 MiB, so the server ended
 * silently. Here a line that is refused gets a JSON-RPC error and the next one is served.
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { Either } from "effect"
import type { Refusal } from "./jsonRpcMessage.js"
import { decodeMessage, oversized } from "./jsonRpcMessage.js"
import type { Framed } from "./lineFraming.js"
import { makeLineSplitter } from "./lineFraming.js"
import { MaxMessageBytes } from "./limits.js"

const Blank = /^[ \t\r]*$/

export class LineTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  private readonly split: (chunk: Buffer) => ReadonlyArray<Framed>
  private started = false

  constructor(
    private readonly input: NodeJS.ReadableStream = process.stdin,
    private readonly output: NodeJS.WritableStream = process.stdout,
    maxBytes: number = MaxMessageBytes
  ) {
    this.split = makeLineSplitter(maxBytes)
  }

  private readonly onData = (chunk: Buffer | string) => {
    for (const framed of this.split(typeof chunk === "string" ? Buffer.from(chunk, "utf8") : chunk)) {
      if (framed._tag === "Oversized") this.refuse(oversized(framed.bytes, framed.id))
      else this.receive(framed.bytes)
    }
  }

  private readonly onInputError = (error: Error) => this.onerror?.(error)

  private receive(line: Buffer) {
    const bytes = line.at(-1) === 0x0d ? line.subarray(0, -1) : line
    if (bytes.length < 64 && Blank.test(bytes.toString("latin1"))) return
    const decoded = decodeMessage(bytes)
    if (Either.isLeft(decoded)) return this.refuse(decoded.left)
    try {
      this.onmessage?.(decoded.right)
    } catch (error) {
      this.onerror?.(error instanceof Error ? error : new Error(String(error)))
    }
  }

  /** JSON-RPC's error answer; `id` is null when the line's id could not be read. */
  private refuse({ id, code, message }: Refusal) {
    this.write({ jsonrpc: "2.0", id, error: { code, message } })
  }

  private write(message: unknown): Promise<void> {
    return new Promise((resolve) => {
      if (this.output.write(`${JSON.stringify(message)}\n`)) resolve()
      else this.output.once("drain", resolve)
    })
  }

  start(): Promise<void> {
    if (this.started) return Promise.reject(new Error("LineTransport already started"))
    this.started = true
    this.input.on("data", this.onData)
    this.input.on("error", this.onInputError)
    return Promise.resolve()
  }

  send(message: JSONRPCMessage): Promise<void> {
    return this.write(message)
  }

  close(): Promise<void> {
    this.input.off("data", this.onData)
    this.input.off("error", this.onInputError)
    if (this.input.listenerCount("data") === 0) this.input.pause()
    this.onclose?.()
    return Promise.resolve()
  }
}
