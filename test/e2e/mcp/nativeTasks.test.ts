/**
 * MCP tasks (protocol revision 2025-11-25) on `relaykeep-tasks`, driven by the SDK client's own
 * tasks API (`callToolStream`, `getTask`, `getTaskResult`, `listTasks`, `cancelTask`) over stdio
 * against the built binaries, with real workers: a task is created at once, polled, finished by a
 * worker in another process, read back from a new server process, cancelled while it runs, and a
 * forged handle is refused as a wrong hash is. A client without the tasks capability keeps
 * submit and read.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import type { ClientCapabilities, Task } from "@modelcontextprotocol/sdk/types.js"
import { CallToolResultSchema, TaskStatusNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { Schema } from "effect"
import * as path from "node:path"
import { parseHandle } from "../../../src/domain/mcpTask.js"
import { Receipt, TaskView } from "../../../src/domain/Task.js"
import { PassReport } from "../../../src/worker/pass.js"
import { withTimeout } from "../../chaos/support.js"
import { cliJson, initializedNotification, initializeRequest, relaykeep } from "../../support/mcpProcess.js"
import { auditEntriesUnder, call, callOk, errorResult, okResult, useMcpTest } from "../../support/mcpStdio.js"
import { effectsIn, useScriptedWorkers } from "../../support/scriptedWorker.js"
import { waitFor } from "../../support/waitFor.js"

// Registered before the scripted workers' afterEach, so it runs after it: workers die before their roots go.
const mcp = useMcpTest()
const { startWorker } = useScriptedWorkers()

const TasksClient: ClientCapabilities = { tasks: { list: {}, cancel: {} } }

/** Create a task of `submit` with the SDK's stream and stop reading it once the task exists. */
const createTask = async (client: Client, id: string, payload: object, ttl?: number): Promise<Task> => {
  const stream = client.experimental.tasks.callToolStream(
    { name: "submit", arguments: { client_request_id: id, payload } },
    CallToolResultSchema,
    { task: ttl === undefined ? {} : { ttl } }
  )
  for await (const message of stream) {
    if (message.type === "taskCreated") return message.task
    throw new Error(`expected taskCreated first, got ${JSON.stringify(message)}`)
  }
  throw new Error("the stream ended without a task")
}

/** The JSON-RPC error a promise rejects with: its code and message. */
const rpcError = async (promise: Promise<unknown>): Promise<{ code: number; message: string }> => {
  try {
    await promise
  } catch (error) {
    assert.instanceOf(error, McpError)
    return { code: error.code, message: error.message }
  }
  throw new Error("expected a JSON-RPC error")
}

const onePass = async (root: string) => cliJson(PassReport, await relaykeep(["worker", "--root", root]))

describe("MCP tasks on relaykeep-tasks", { timeout: 180_000 }, () => {
  it("advertises tasks; a submit made a task is working until a worker runs it, then completed with the task as read shows it", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const session = await mcp.tasks(root, TasksClient)
    assert.deepStrictEqual(session.client.getServerCapabilities()?.tasks, {
      list: {},
      cancel: {},
      requests: { tools: { call: {} } }
    })
    const { tools } = await session.client.listTools()
    assert.deepStrictEqual(tools.find((tool) => tool.name === "submit")?.execution, {
      taskSupport: "optional"
    })
    assert.isUndefined(tools.find((tool) => tool.name === "read")?.execution, "read is never a task")
    const statuses: Array<Task> = []
    session.client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => {
      statuses.push(notification.params)
    })

    const payload = { message: "hello" }
    const stream = session.client.experimental.tasks.callToolStream(
      { name: "submit", arguments: { client_request_id: "native-1", payload } },
      CallToolResultSchema,
      { task: { ttl: 3_600_000 } }
    )
    const seen: Array<string> = []
    let created: Task | undefined
    let final: unknown
    let pass: Promise<unknown> | undefined
    for await (const message of stream) {
      seen.push(message.type)
      if (message.type === "taskCreated") {
        created = message.task
        // A worker in another process runs it while the SDK polls.
        pass = onePass(root)
      } else if (message.type === "taskStatus" && message.task.status === "working") {
        assert.strictEqual(message.task.pollInterval, 1000)
      } else if (message.type === "result") final = message.result
      else if (message.type === "error") throw message.error
    }
    await pass
    assert.isDefined(created)
    assert.strictEqual(created?.status, "working")
    assert.strictEqual(created?.ttl, 3_600_000, "the ttl asked for is kept")
    assert.strictEqual(created?.statusMessage, "queued: waiting for a worker")
    assert.strictEqual(seen[0], "taskCreated")
    assert.strictEqual(seen.at(-1), "result")
    const handle = parseHandle(created?.taskId ?? "")
    assert.strictEqual(handle._tag, "Some", "the taskId is a handle")

    // The result is the task as read shows it: the SDK checked it against submit's outputSchema.
    const view = okResult(TaskView, Schema.decodeUnknownSync(ResultShape)(final))
    assert.strictEqual(view.state, "complete")
    assert.deepStrictEqual(view.result, { echo: payload, provider: "fake-echo" })
    if (handle._tag === "Some") {
      assert.strictEqual(view.task_id, handle.value.taskId)
      assert.strictEqual(view.payload_sha256, handle.value.payloadSha256)
    }

    const done = await session.client.experimental.tasks.getTask(created?.taskId ?? "")
    assert.strictEqual(done.status, "completed")
    assert.strictEqual(done.statusMessage, "completed after 1 attempt")
    assert.strictEqual(done.ttl, 3_600_000)
    assert.isUndefined(done.pollInterval, "a finished task is not polled")
    assert.strictEqual(done.createdAt, created?.createdAt)
    // While connected, the client heard of the change without asking.
    await waitFor("a completed status notification", () =>
      statuses.some((status) => status.taskId === created?.taskId && status.status === "completed")
        ? true
        : undefined
    )

    // The same request again is the same task: holding the handle is holding the receipt.
    const again = await createTask(session.client, "native-1", payload)
    assert.strictEqual(again.taskId, created?.taskId)
    assert.strictEqual(again.status, "completed")
  })

  it("a task created through one server process finishes under a worker and is answered by a new server process", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const first = await mcp.tasks(root, TasksClient)
    const task = await createTask(first.client, "restart-1", { message: "after a restart" }, 60_000)
    await first.client.close()

    const pass = await onePass(root)
    assert.strictEqual(pass.dispatched.length, 1)

    const second = await mcp.tasks(root, TasksClient)
    const got = await second.client.experimental.tasks.getTask(task.taskId)
    assert.strictEqual(got.status, "completed")
    assert.strictEqual(got.ttl, 60_000, "the ttl outlives the process that was asked for it")
    const result = await second.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
    const view = okResult(TaskView, Schema.decodeUnknownSync(ResultShape)(result))
    assert.deepStrictEqual(view.result, { echo: { message: "after a restart" }, provider: "fake-echo" })
    assert.deepStrictEqual(result._meta?.["io.modelcontextprotocol/related-task"], { taskId: task.taskId })
    const listed = await second.client.experimental.tasks.listTasks()
    assert.deepStrictEqual(
      listed.tasks.map((entry) => [entry.taskId, entry.status]),
      [[task.taskId, "completed"]]
    )
    assert.isUndefined(listed.nextCursor)
  })

  it("a failed task reads failed, and its result is an error answer with the task's error", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const session = await mcp.tasks(root, TasksClient)
    const task = await createTask(session.client, "fails-1", { provider: "no-such-provider", prompt: "x" })
    await onePass(root)
    const got = await session.client.experimental.tasks.getTask(task.taskId)
    assert.strictEqual(got.status, "failed")
    assert.match(got.statusMessage ?? "", /^failed: UnknownProvider: provider: the payload names no provider/)
    const result = await session.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
    const message = errorResult(Schema.decodeUnknownSync(ResultShape)(result), "UnknownProvider")
    assert.match(message, /^provider: the payload names no provider of this worker/)
    // The SDK's stream reports a failed task as an error.
    const stream = session.client.experimental.tasks.callToolStream(
      {
        name: "submit",
        arguments: { client_request_id: "fails-1", payload: { provider: "no-such-provider", prompt: "x" } }
      },
      CallToolResultSchema,
      { task: {} }
    )
    const types: Array<string> = []
    for await (const message of stream) types.push(message.type)
    assert.deepStrictEqual(types, ["taskCreated", "taskStatus", "error"])
  })

  it("tasks/result waits for a worker and sends progress while it waits", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const session = await mcp.tasks(root, TasksClient)
    const task = await createTask(session.client, "waits-1", { message: "later" })
    const progress: Array<number> = []
    const waiting = session.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, {
      onprogress: (update) => progress.push(update.progress),
      resetTimeoutOnProgress: true
    })
    await new Promise((resolve) => setTimeout(resolve, 2_500))
    await onePass(root)
    const view = okResult(TaskView, Schema.decodeUnknownSync(ResultShape)(await waiting))
    assert.strictEqual(view.state, "complete")
    assert.isAtLeast(progress.length, 2, "progress while waiting")
    assert.deepStrictEqual(
      [...progress].sort((a, b) => a - b),
      progress,
      "progress only grows"
    )
  })

  it("cancelling a running task stops its provider and answers cancelled; a finished task cannot be cancelled", async () => {
    const dir = mcp.tempDir()
    const root = path.join(dir, "root")
    const effects = path.join(dir, "effects.jsonl")
    const session = await mcp.tasks(root, TasksClient)
    const task = await createTask(session.client, "long-1", {
      provider: "claude",
      model: "sonnet",
      prompt: JSON.stringify({ sleep_ms: 60_000 })
    })
    const handle = parseHandle(task.taskId)
    assert.strictEqual(handle._tag, "Some")
    const worker = startWorker(root, dir, effects)
    await waitFor(
      () => `the provider to start (worker stderr: ${worker.stderr()})`,
      () => effectsIn(effects).find((effect) => effect.event === "start")
    )
    const running = await session.client.experimental.tasks.getTask(task.taskId)
    assert.strictEqual(running.status, "working")
    assert.match(running.statusMessage ?? "", /^running attempt 1 of 1 on worker /)

    const cancelled = await session.client.experimental.tasks.cancelTask(task.taskId)
    assert.strictEqual(cancelled.status, "cancelled", "the worker stopped it within the wait")
    const result = await session.client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
    errorResult(Schema.decodeUnknownSync(ResultShape)(result), "Cancelled")
    assert.isFalse(
      effectsIn(effects).some((effect) => effect.event === "done"),
      "the provider never got to finish"
    )
    const refused = await rpcError(session.client.experimental.tasks.cancelTask(task.taskId))
    assert.strictEqual(refused.code, -32602)
    assert.match(refused.message, /TaskFinished: task [0-9a-f]{64} is already cancelled/)
    const summary = await worker.stop()
    assert.strictEqual(summary.cancelled, 1)
  })

  it("a queued task is cancelled at once", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const session = await mcp.tasks(root, TasksClient)
    const task = await createTask(session.client, "queued-1", { message: "never run" })
    const cancelled = await session.client.experimental.tasks.cancelTask(task.taskId)
    assert.strictEqual(cancelled.status, "cancelled")
    const pass = await onePass(root)
    assert.strictEqual(pass.dispatched.length, 0, "nothing left to run")
  })

  it("a forged or altered handle gets the error a wrong hash or a wrong id gets from read", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const session = await mcp.tasks(root, TasksClient)
    const task = await createTask(session.client, "forged-1", { message: "mine" })
    const handle = parseHandle(task.taskId)
    if (handle._tag === "None") throw new Error("not a handle")
    const { taskId, payloadSha256 } = handle.value
    const flip = (hex: string) => `${hex.slice(0, -1)}${hex.endsWith("0") ? "1" : "0"}`
    const otherHash = `rk1-${taskId}-${flip(payloadSha256)}`
    const otherTask = `rk1-${flip(taskId)}-${payloadSha256}`

    const byRead = errorResult(
      await call(session, "read", { task_id: taskId, payload_sha256: flip(payloadSha256) }),
      "HashMismatch"
    )
    const unknownByRead = errorResult(
      await call(session, "read", { task_id: flip(taskId), payload_sha256: payloadSha256 }),
      "UnknownTask"
    )
    const tasks = session.client.experimental.tasks
    for (const request of [
      (id: string) => tasks.getTask(id),
      (id: string) => tasks.getTaskResult(id, CallToolResultSchema),
      (id: string) => tasks.cancelTask(id)
    ]) {
      assert.deepStrictEqual(await rpcError(request(otherHash)), {
        code: -32602,
        message: `MCP error -32602: HashMismatch: ${byRead}`
      })
      assert.deepStrictEqual(await rpcError(request(otherTask)), {
        code: -32602,
        message: `MCP error -32602: UnknownTask: ${unknownByRead}`
      })
      const malformed = await rpcError(request(`${task.taskId}x`))
      assert.strictEqual(malformed.code, -32602)
      assert.match(malformed.message, /InvalidArguments: taskId: must be a taskId this server returned/)
    }
    // Nothing was changed by the forged cancel.
    assert.strictEqual((await tasks.getTask(task.taskId)).status, "working")

    // Every tasks/* request was audited like a tool call, refusals included.
    const entries = auditEntriesUnder(root)
    const byTool = (tool: string) => entries.filter((entry) => entry.tool === tool)
    assert.strictEqual(byTool("tasks/get").filter((entry) => entry.status === "error").length, 2)
    assert.strictEqual(byTool("tasks/get").filter((entry) => entry.status === "invalid").length, 1)
    assert.strictEqual(byTool("tasks/get").filter((entry) => entry.status === "ok").length, 1)
    assert.strictEqual(byTool("tasks/result").length, 3)
    assert.strictEqual(byTool("tasks/cancel").length, 3)
    const creation = byTool("submit").find((entry) => entry.task_id !== undefined)
    assert.strictEqual(creation?.task_id, taskId, "the call that made a task names it")
    assert.deepStrictEqual(byTool("tasks/get")[0]?.arguments, { taskId: otherHash })
  })

  it("a server whose stdin closes while a tasks/result waits exits at once, the wait audited as cancelled", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const server = mcp.rawTasks(root)
    server.send({
      ...initializeRequest(1),
      params: { ...initializeRequest(1).params, protocolVersion: "2025-11-25", capabilities: TasksClient }
    })
    await server.response(1)
    server.send(initializedNotification)
    server.send({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "submit", arguments: { client_request_id: "never-run", payload: {} }, task: {} }
    })
    await server.response(2)
    const createdLine = server.lines().find((line) => line.includes('"id":2'))
    const created = Schema.decodeUnknownSync(CreatedLine)(createdLine)
    // No worker: the task stays queued, and the result would wait for it for ever.
    server.send({
      jsonrpc: "2.0",
      id: 3,
      method: "tasks/result",
      params: { taskId: created.result.task.taskId }
    })
    await new Promise((resolve) => setTimeout(resolve, 500))
    server.closeStdin()
    const exit = await withTimeout(server.exited, 5_000)
    assert.isDefined(exit, "the server still ran 5 s after stdin closed")
    assert.strictEqual(exit?.code, 0, `exit code; stderr: ${exit?.stderr}`)
    const waited = auditEntriesUnder(root).filter((entry) => entry.tool === "tasks/result")
    assert.deepStrictEqual(
      waited.map((entry) => [entry.status, entry.error?.tag]),
      [["error", "Cancelled"]]
    )
  })

  it("nobody submits a task of the in-server provider: MCP and the CLI refuse it (the dashboard's route: test/dashboard/api.test.ts)", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const session = await mcp.tasks(root)
    const payload = { provider: "mcp-tool", server: "x", tool: "y", arguments: null }
    const message = errorResult(
      await call(session, "submit", { client_request_id: "reserved", payload }),
      "InvalidArguments"
    )
    assert.strictEqual(
      message,
      "payload: provider: mcp-tool is reserved for the tasks an MCP server runs itself"
    )
    const cli = await relaykeep([
      "submit",
      "--root",
      root,
      "--id",
      "reserved",
      "--payload",
      JSON.stringify(payload)
    ])
    assert.strictEqual(cli.code, 2)
    assert.strictEqual(
      cli.stderr,
      "InvalidInput: --payload: provider: mcp-tool is reserved for the tasks an MCP server runs itself\n"
    )
    const listed = await call(session, "list", {})
    assert.deepStrictEqual(listed.structuredContent?.["tasks"], [], "nothing was stored")
  })

  it("a client without the tasks capability keeps submit and read, and tasks/list pages every task", async () => {
    const root = path.join(mcp.tempDir(), "root")
    const plain = await mcp.tasks(root)
    const receipt = await callOk(plain, Receipt, "submit", {
      client_request_id: "plain-1",
      payload: { n: 1 }
    })
    await onePass(root)
    const view = await callOk(plain, TaskView, "read", {
      task_id: receipt.task_id,
      payload_sha256: receipt.payload_sha256
    })
    assert.strictEqual(view.state, "complete")
    // Its task is a task all the same, for a client that has the capability.
    const modern = await mcp.tasks(root, TasksClient)
    for (let n = 2; n <= 3; n++) await createTask(modern.client, `plain-${n}`, { n })
    const listed = await modern.client.experimental.tasks.listTasks()
    assert.deepStrictEqual(
      listed.tasks.map((task) => task.status),
      ["working", "working", "completed"]
    )
    assert.strictEqual(
      listed.tasks.at(-1)?.taskId,
      `rk1-${receipt.task_id}-${receipt.payload_sha256}`,
      "a task submitted plainly has the handle its receipt spells"
    )
  })
})

const ResultShape = Schema.Struct({
  content: Schema.Array(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })),
  structuredContent: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  isError: Schema.optional(Schema.Boolean)
})

const CreatedLine = Schema.parseJson(
  Schema.Struct({ result: Schema.Struct({ task: Schema.Struct({ taskId: Schema.String }) }) })
)
