/**
 * End-to-end helpers for the MCP servers: real temp roots, and the SDK `Client` over stdio
 * talking to the built binaries, with decoded tool results. Run `npm run build` first.
 */
import { afterEach, assert } from "@effect/vitest"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js"
import { Schema } from "effect"
import { AuditEntry } from "../../src/domain/audit.js"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { RawServer } from "./mcpProcess.js"
import { memoryBin, spawnRaw, tasksBin } from "./mcpProcess.js"

/**
 * Per test: fresh temp directories and MCP sessions, all closed and removed after the test,
 * sessions first (a server holds files under its root until it exits).
 */
export const useMcpTest = () => {
  const dirs: Array<string> = []
  const clients: Array<Client> = []
  const raws: Array<RawServer> = []
  afterEach(async () => {
    await Promise.all(clients.splice(0).map((client) => client.close()))
    await Promise.all(raws.splice(0).map((server) => server.kill()))
    for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
  })
  const tempDir = (): string => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "relaykeep-mcp-e2e-"))
    dirs.push(dir)
    return dir
  }
  /**
   * Connect to `node <binary> ...args`; tools are listed once so the SDK validates outputs. The
   * client declares `capabilities` (none by default).
   */
  const connect = async (
    binary: string,
    args: ReadonlyArray<string>,
    capabilities: ClientCapabilities = {}
  ): Promise<Session> => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [binary, ...args],
      stderr: "pipe"
    })
    const stderr: Array<string> = []
    // Read stderr, so that a chatty server never blocks on a full pipe; kept for messages.
    transport.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk.toString("utf8")))
    const client = new Client({ name: "relaykeep-e2e", version: "1" }, { capabilities })
    clients.push(client)
    await client.connect(transport)
    await client.listTools()
    return { client, stderr: () => stderr.join("") }
  }
  return {
    tempDir,
    connect,
    tasks: (root: string, capabilities?: ClientCapabilities) =>
      connect(tasksBin, ["--root", root], capabilities),
    /** `relaykeep-tasks --root root`, driven by hand (see spawnRaw). */
    rawTasks: (root: string): RawServer => {
      const server = spawnRaw(tasksBin, ["--root", root])
      raws.push(server)
      return server
    },
    memory: (store: string, root: string) => connect(memoryBin, ["--store", store, "--root", root])
  }
}

export interface Session {
  readonly client: Client
  /** Everything the server wrote to stderr so far. */
  readonly stderr: () => string
}

/** A tools/call result as the wire carries it; our servers only ever answer with text. */
export const CallResult = Schema.Struct({
  content: Schema.Array(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })),
  structuredContent: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  isError: Schema.optional(Schema.Boolean)
})
export type CallResult = typeof CallResult.Type

export const call = async (
  session: Session,
  name: string,
  args: Record<string, unknown>,
  options?: RequestOptions
): Promise<CallResult> =>
  Schema.decodeUnknownSync(CallResult)(
    await session.client.callTool({ name, arguments: args }, undefined, options)
  )

/**
 * A success: not an error, one text block holding exactly the JSON of structuredContent,
 * which decodes (with no extra keys) as `schema`.
 */
export const okResult = <A, I>(schema: Schema.Schema<A, I>, result: CallResult): A => {
  const [first, ...rest] = result.content
  assert.notStrictEqual(result.isError, true, `unexpected error result: ${first?.text}`)
  assert.isDefined(result.structuredContent, "structuredContent")
  assert.isDefined(first, "a text block")
  assert.strictEqual(rest.length, 0, "one content block")
  assert.strictEqual(first?.text, JSON.stringify(result.structuredContent), "text is the structured JSON")
  return Schema.decodeUnknownSync(schema, { onExcessProperty: "error" })(result.structuredContent)
}

/** An error result: `isError`, no structuredContent, one text `Tag: message`. Returns the message. */
export const errorResult = (result: CallResult, tag: string): string => {
  const [first, ...rest] = result.content
  assert.strictEqual(result.isError, true, `expected ${tag}, got ${first?.text}`)
  assert.isUndefined(result.structuredContent, "no structuredContent on an error")
  assert.strictEqual(rest.length, 0, "one content block")
  const text = first?.text ?? ""
  assert.isTrue(text.startsWith(`${tag}: `), `expected "${tag}: ...", got ${text}`)
  const message = text.slice(tag.length + 2)
  assert.isAbove(message.trim().length, 0, "the message is not empty")
  return message
}

export const callOk = async <A, I>(
  session: Session,
  schema: Schema.Schema<A, I>,
  name: string,
  args: Record<string, unknown>
): Promise<A> => okResult(schema, await call(session, name, args))

export const callError = async (
  session: Session,
  tag: string,
  name: string,
  args: Record<string, unknown>
): Promise<string> => errorResult(await call(session, name, args), tag)

/** Every entry of the audit log under `<root>/audit`, day file by day file, each decoded. */
export const auditEntriesUnder = (root: string): ReadonlyArray<AuditEntry> =>
  fs
    .readdirSync(path.join(root, "audit"))
    .filter((name) => name.endsWith(".jsonl"))
    .sort()
    .flatMap((name) => fs.readFileSync(path.join(root, "audit", name), "utf8").split("\n"))
    .filter((line) => line !== "")
    .map((line) => Schema.decodeUnknownSync(Schema.parseJson(AuditEntry))(line))
