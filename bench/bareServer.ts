/**
 * The baseline of mcp-roundtrip: a bare MCP server on the SDK (`McpServer` over
 * `StdioServerTransport`, arguments checked by zod, as the SDK's own examples do) with the two
 * tools the round trip calls and none of RelayKeep's machinery (no store, no pipeline, no audit).
 *
 * `submit` does the durable work a submit must do: the record (padded to `--record-bytes`, the
 * size of RelayKeep's record for the same payload) is written to a temp file, fsynced, renamed
 * into place, and the directory fsynced, before the answer goes back. `read` reads it back.
 *
 * Run: `node --import tsx bench/bareServer.ts --dir DIR --record-bytes N`.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { createHash } from "node:crypto"
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from "node:fs"
import path from "node:path"
import { parseArgs } from "node:util"
import { z } from "zod"

const { values } = parseArgs({
  options: { dir: { type: "string" }, "record-bytes": { type: "string" } },
  strict: true
})
const dir = values.dir
const recordBytes = Number(values["record-bytes"] ?? 0)
if (dir === undefined || !Number.isInteger(recordBytes)) {
  process.stderr.write("usage: bareServer --dir DIR --record-bytes N\n")
  process.exit(2)
}

/** write temp, fsync, close, rename, fsync the directory: the least a durable write costs. */
const durableWrite = (file: string, bytes: Uint8Array) => {
  const temp = path.join(dir, `.${path.basename(file)}.tmp`)
  const fd = openSync(temp, "wx", 0o600)
  try {
    writeSync(fd, bytes)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(temp, file)
  const dirFd = openSync(dir, "r")
  try {
    fsyncSync(dirFd)
  } finally {
    closeSync(dirFd)
  }
}

const idOf = (clientRequestId: string) => createHash("sha256").update(clientRequestId).digest("hex")
const recordFile = (taskId: string) => path.join(dir, `${taskId}.json`)
const text = (value: unknown) => ({ content: [{ type: "text" as const, text: JSON.stringify(value) }] })

const server = new McpServer({ name: "bare", version: "1.0.0" })

server.registerTool(
  "submit",
  {
    description: "Store a task durably and return its id.",
    inputSchema: { client_request_id: z.string().min(1).max(200), payload: z.record(z.string(), z.unknown()) }
  },
  ({ client_request_id, payload }) => {
    const taskId = idOf(client_request_id)
    const record = JSON.stringify({ task_id: taskId, client_request_id, payload, state: "queued" })
    // Padded with whitespace (still valid JSON) to the size of RelayKeep's record.
    durableWrite(recordFile(taskId), Buffer.from(record.padEnd(recordBytes - 1, " ") + "\n", "utf8"))
    return text({ task_id: taskId })
  }
)

server.registerTool(
  "read",
  { description: "Read a task by its id.", inputSchema: { task_id: z.string().regex(/^[0-9a-f]{64}$/) } },
  ({ task_id }) => text(JSON.parse(readFileSync(recordFile(task_id), "utf8")))
)

await server.connect(new StdioServerTransport())
