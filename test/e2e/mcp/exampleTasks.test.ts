/**
 * examples/long-task-server.mjs over stdio with the SDK client's tasks API: a toolkit server whose
 * tools run as MCP tasks in its background, kept in a RelayKeep queue. A task completes, fails,
 * is cancelled while it runs, and is reported failed (interrupted) by a new server process after
 * the one running it was killed or stopped; a `required` tool refuses a plain call; every run's
 * end is audited.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { Task } from "@modelcontextprotocol/sdk/types.js"
import { CallToolResultSchema, McpError } from "@modelcontextprotocol/sdk/types.js"
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { parseHandle } from "../../../src/domain/mcpTask.js"
import { PassReport } from "../../../src/worker/pass.js"
import { cliJson, relaykeep } from "../../support/mcpProcess.js"
import { auditEntriesUnder } from "../../support/mcpStdio.js"
import { waitFor } from "../../support/waitFor.js"

const repo = path.resolve(import.meta.dirname, "..", "..", "..")
const dirs: Array<string> = []
const clients: Array<Client> = []
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.close()))
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

const newRoot = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "relaykeep-long-tasks-"))
  dirs.push(dir)
  return path.join(dir, "root")
}

const connect = async (root: string) => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [path.join(repo, "examples", "long-task-server.mjs"), "--root", root],
    cwd: repo,
    stderr: "ignore"
  })
  const client = new Client({ name: "long-tasks-test", version: "1" }, { capabilities: { tasks: {} } })
  clients.push(client)
  await client.connect(transport)
  await client.listTools()
  return { client, transport }
}

const create = async (client: Client, name: string, args: Record<string, unknown>): Promise<Task> => {
  for await (const message of client.experimental.tasks.callToolStream(
    { name, arguments: args },
    CallToolResultSchema,
    { task: { ttl: 600_000 } }
  )) {
    if (message.type === "taskCreated") return message.task
    throw new Error(`expected taskCreated, got ${JSON.stringify(message)}`)
  }
  throw new Error("no task")
}

const settled = (client: Client, taskId: string) =>
  waitFor(`task ${taskId} to finish`, async () => {
    const task = await client.experimental.tasks.getTask(taskId)
    return task.status === "working" ? undefined : task
  })

const ResultText = Schema.Struct({
  content: Schema.Tuple(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })),
  structuredContent: Schema.optional(Schema.Unknown),
  isError: Schema.optional(Schema.Boolean)
})

describe("examples/long-task-server.mjs", { timeout: 120_000 }, () => {
  it("count_to as a task: created at once, run in the background, its result kept and its end audited", async () => {
    const root = newRoot()
    const { client } = await connect(root)
    const { tools } = await client.listTools()
    assert.deepStrictEqual(
      tools.map((tool) => [tool.name, tool.execution?.taskSupport]),
      [
        ["count_to", "optional"],
        ["count_or_fail", "required"]
      ]
    )
    const task = await create(client, "count_to", { n: 3, interval_ms: 50 })
    assert.strictEqual(task.status, "working")
    assert.strictEqual(task.ttl, 600_000)
    const done = await settled(client, task.taskId)
    assert.strictEqual(done.status, "completed")
    const result = await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
    assert.deepStrictEqual(result.structuredContent, { counted: 3 })

    // Called plainly, the optional tool answers as any tool does.
    const plain = await client.callTool({ name: "count_to", arguments: { n: 1, interval_ms: 10 } })
    assert.deepStrictEqual(plain.structuredContent, { counted: 1 })

    const handle = parseHandle(task.taskId)
    if (handle._tag === "None") throw new Error("not a handle")
    const entries = auditEntriesUnder(root).filter((entry) => entry.task_id === handle.value.taskId)
    assert.deepStrictEqual(
      entries.map((entry) => [entry.tool, entry.status]),
      [
        ["count_to", "ok"],
        ["count_to", "ok"]
      ],
      "the call that made the task, then the end of its run"
    )
    assert.isAtLeast(entries[1]?.duration_ms ?? 0, 100, "the run's entry times the run")
  })

  it("a required tool refuses a plain call; called as a task, its failure fails the task with the tool's error", async () => {
    const root = newRoot()
    const { client } = await connect(root)
    // The SDK's client guards required tools itself; the server refuses them too, as -32601.
    const plain = await client
      .request(
        { method: "tools/call", params: { name: "count_or_fail", arguments: { n: 2, fail_at: 1 } } },
        CallToolResultSchema
      )
      .then(
        () => undefined,
        (error: unknown) => error
      )
    assert.instanceOf(plain, McpError)
    if (plain instanceof McpError) {
      assert.strictEqual(plain.code, -32601)
      assert.include(plain.message, "TaskSupportMismatch: count_or_fail runs only as a task")
    }
    const task = await create(client, "count_or_fail", { n: 3, fail_at: 2, interval_ms: 20 })
    const failed = await settled(client, task.taskId)
    assert.strictEqual(failed.status, "failed")
    assert.strictEqual(failed.statusMessage, "failed: CountFailed: gave up at step 2")
    const result = Schema.decodeUnknownSync(ResultText)(
      await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
    )
    assert.strictEqual(result.isError, true)
    assert.strictEqual(result.content[0].text, "CountFailed: gave up at step 2")
  })

  it("cancelling a running task stops the tool at once", async () => {
    const root = newRoot()
    const { client } = await connect(root)
    const task = await create(client, "count_to", { n: 600, interval_ms: 100 })
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId)
    assert.strictEqual(cancelled.status, "cancelled")
    const result = Schema.decodeUnknownSync(ResultText)(
      await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
    )
    assert.match(result.content[0].text, /^Cancelled: /)
    // The run's end is audited as it was written: cancelled, not the tool's own end.
    const handle = parseHandle(task.taskId)
    if (handle._tag === "None") throw new Error("not a handle")
    const ends = await waitFor("the run's end in the audit log", () => {
      const entries = auditEntriesUnder(root).filter((entry) => entry.task_id === handle.value.taskId)
      return entries.length === 2 ? entries : undefined
    })
    assert.deepStrictEqual(
      ends.map((entry) => [entry.status, entry.error?.tag ?? null]),
      [
        ["ok", null],
        ["error", "Cancelled"]
      ]
    )
  })

  it("a server killed mid-run: a new server process reports the task failed (interrupted); a worker never takes it", async () => {
    const root = newRoot()
    const first = await connect(root)
    const task = await create(first.client, "count_to", { n: 600, interval_ms: 100 })
    const pass = cliJson(PassReport, await relaykeep(["worker", "--root", root]))
    assert.deepStrictEqual(pass.dispatched, [], "a worker on the same root leaves a server's task alone")
    const pid = first.transport.pid
    if (pid === null) throw new Error("no server pid")
    process.kill(pid, "SIGKILL")
    await waitFor("the server to die", () => {
      try {
        process.kill(pid, 0)
        return undefined
      } catch {
        return true
      }
    })

    const second = await connect(root)
    const got = await second.client.experimental.tasks.getTask(task.taskId)
    assert.strictEqual(got.status, "failed")
    assert.match(
      got.statusMessage ?? "",
      /^failed: interrupted: the server running it stopped before it finished/
    )
    const result = Schema.decodeUnknownSync(ResultText)(
      await second.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
    )
    assert.strictEqual(result.isError, true)
  })

  it("a server stopped mid-run (stdin closed) fails its running tasks as interrupted before it exits", async () => {
    const root = newRoot()
    const first = await connect(root)
    const task = await create(first.client, "count_to", { n: 600, interval_ms: 100 })
    await first.client.close()
    const second = await connect(root)
    const got = await settled(second.client, task.taskId)
    assert.strictEqual(got.status, "failed")
    assert.strictEqual(got.statusMessage, "failed: Interrupted: the server stopped before the tool finished")
  })
})
