/** The stdio servers by hand: stdout carries JSON-RPC only, and the server ends when stdin closes. */
import { assert, describe, it } from "@effect/vitest"
import { Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { RawExit } from "../../support/mcpProcess.js"
import { useMcpTest } from "../../support/mcpStdio.js"
import { initializedNotification, initializeRequest, JsonRpcLine } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

/**
 * "A few seconds": the server must notice the closed stdin by itself rather than run until it
 * is killed. Generous, because CI machines are loaded and a node process is slow to tear down.
 */
const ExitWithinMillis = 10_000

const decodeLine = Schema.decodeUnknownOption(JsonRpcLine, { onExcessProperty: "error" })

/** Every stdout line is one JSON-RPC message; returns the ids of the responses, in order. */
const jsonRpcOnly = (exit: RawExit): ReadonlyArray<string | number | null> =>
  exit.stdoutLines.map((line) => {
    const message = decodeLine(line)
    assert.isTrue(Option.isSome(message), `stdout carries a line that is not JSON-RPC: ${line}`)
    return Option.match(message, {
      onNone: () => null,
      onSome: (value) => ("method" in value ? null : value.id)
    })
  })

const cleanExit = (exit: RawExit) => {
  assert.strictEqual(exit.signal, null, `killed by ${exit.signal}; stderr: ${exit.stderr}`)
  assert.strictEqual(exit.code, 0, `exit code; stderr: ${exit.stderr}`)
  assert.isBelow(exit.millisAfterStdinClosed, ExitWithinMillis, "exits soon after stdin closes")
}

const ToolNames = Schema.parseJson(
  Schema.Struct({
    id: Schema.Literal(2),
    result: Schema.Struct({ tools: Schema.Array(Schema.Struct({ name: Schema.String })) })
  })
)

describe("relaykeep-tasks on stdio", () => {
  it("answers initialize and tools/list, prints only JSON-RPC, and exits 0 by itself when stdin closes", async () => {
    const server = mcp.rawTasks(mcp.tempDir())
    // Wait for the first answer only so that the time to exit is not the time to start.
    server.send(initializeRequest(1))
    await server.response(1)
    server.send(initializedNotification)
    server.send({ jsonrpc: "2.0", id: 2, method: "tools/list" })
    server.closeStdin()
    const exit = await server.exited
    cleanExit(exit)
    assert.deepStrictEqual(jsonRpcOnly(exit), [1, 2])
    const tools = exit.stdoutLines.flatMap((line) =>
      Option.toArray(Schema.decodeUnknownOption(ToolNames)(line)).flatMap((response) => response.result.tools)
    )
    assert.deepStrictEqual(
      tools.map((tool) => tool.name),
      ["submit", "read", "cancel", "list", "broadcast", "read_group"]
    )
  })

  it("after its answers have arrived, a session exits 0 soon after stdin closes", async () => {
    const server = mcp.rawTasks(mcp.tempDir())
    server.send(initializeRequest(1))
    await server.response(1)
    server.send(initializedNotification)
    server.send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "list", arguments: {} } })
    await server.response(2)
    server.closeStdin()
    const exit = await server.exited
    cleanExit(exit)
    assert.deepStrictEqual(jsonRpcOnly(exit), [1, 2])
  })

  it("logs go to stderr: an audit write that fails is logged there, and stdout stays JSON-RPC", async () => {
    const root = mcp.tempDir()
    // The day file the audit log appends to is a directory, so the append fails (around
    // midnight UTC the day may change during the test: block the neighbours too).
    const audit = path.join(root, "audit")
    for (const offset of [-1, 0, 1]) {
      const day = new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10)
      fs.mkdirSync(path.join(audit, `${day}.jsonl`), { recursive: true })
    }
    const server = mcp.rawTasks(root)
    server.send(initializeRequest(1))
    await server.response(1)
    server.send(initializedNotification)
    server.send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "list", arguments: {} } })
    await server.response(2)
    server.closeStdin()
    const exit = await server.exited
    cleanExit(exit)
    assert.deepStrictEqual(jsonRpcOnly(exit), [1, 2])
    assert.include(exit.stderr, "audit append failed")
  })

  it("a call written before stdin closes is answered and audited before the server exits", async () => {
    const root = mcp.tempDir()
    const server = mcp.rawTasks(root)
    server.send(initializeRequest(1))
    await server.response(1)
    server.send(initializedNotification)
    server.send({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "submit", arguments: { client_request_id: "last-words", payload: { n: 1 } } }
    })
    server.closeStdin()
    const exit = await server.exited
    cleanExit(exit)
    assert.deepStrictEqual(jsonRpcOnly(exit), [1, 2], "the submit was answered")
    const audited = fs
      .readdirSync(path.join(root, "audit"))
      .filter((name) => name.endsWith(".jsonl"))
      .map((name) => fs.readFileSync(path.join(root, "audit", name), "utf8"))
      .join("")
    assert.include(audited, "last-words", "the submit was audited")
  })
})
