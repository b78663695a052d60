/**
 * The relaykeep-tasks MCP server on PostgreSQL (`relaykeep tasks --store postgres://…`), driven
 * by the real SDK client over stdio: the same tools and answers as on the file store, a waiting
 * read woken by a worker in another process, tasks that outlive a session, and stdout that
 * carries JSON-RPC only. Needs RELAYKEEP_TEST_PG_URL and `npm run build`.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { CancelOutcome, Receipt, TaskSummary, TaskView } from "../../../src/domain/Task.js"
import { PassReport } from "../../../src/worker/pass.js"
import { withTimeout } from "../../chaos/support.js"
import type { RawExit } from "../../support/mcpProcess.js"
import {
  cliJson,
  initializedNotification,
  initializeRequest,
  JsonRpcLine,
  relaykeep,
  relaykeepBin,
  spawnRaw
} from "../../support/mcpProcess.js"
import { call, CallResult, callOk, okResult, useMcpTest } from "../../support/mcpStdio.js"
import type { Task } from "@modelcontextprotocol/sdk/types.js"
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js"
import { parseHandle } from "../../../src/domain/mcpTask.js"
import { dropSchema, freshSchema, pgAvailable, pgQuery, pgUrl } from "../../support/pg.js"

const mcp = useMcpTest()
const url = pgUrl ?? ""
const schema = freshSchema()
afterAll(async () => {
  if (pgAvailable) await dropSchema(schema)
})

/** The flags that put a command on `queue` of this file's schema; `root` only holds the audit log. */
const storeArgs = (queue: string, root: string) => [
  "--store",
  url,
  "--pg-schema",
  schema,
  "--queue",
  queue,
  "--root",
  root
]

const tasksServer = (queue: string, root: string) =>
  mcp.connect(relaykeepBin, ["tasks", ...storeArgs(queue, root)])

const ListResult = Schema.Struct({
  tasks: Schema.Array(TaskSummary),
  next_cursor: Schema.NullOr(Schema.String)
})

/** The state column of the task's row: the task is in PostgreSQL, not in a file under the root. */
const stateInPg = async (queue: string, taskId: string): Promise<string | undefined> =>
  (
    await pgQuery<{ readonly state: string }>(
      `SELECT state FROM "${schema}".tasks WHERE queue = $1 AND task_id = $2`,
      [queue, taskId]
    )
  )[0]?.state

const receiptArgs = (receipt: Receipt) => ({
  task_id: receipt.task_id,
  payload_sha256: receipt.payload_sha256
})

describe.skipIf(!pgAvailable)("relaykeep tasks (MCP) on PostgreSQL", { timeout: 120_000 }, () => {
  it("submit, read, cancel and list; a new session (a new server process) reads the same task", async () => {
    const root = mcp.tempDir()
    const session = await tasksServer("tools", root)
    const payload = { message: "hello from MCP", n: 1 }
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "mcp-1", payload })
    const again = await callOk(session, Receipt, "submit", { client_request_id: "mcp-1", payload })
    assert.deepStrictEqual(again, receipt, "the same id and payload give the same receipt")
    const other = await callOk(session, Receipt, "submit", { client_request_id: "mcp-2", payload: { n: 2 } })
    assert.notStrictEqual(other.task_id, receipt.task_id)

    assert.strictEqual(await stateInPg("tools", receipt.task_id), "queued", "the task is a row in PostgreSQL")
    assert.isFalse(fs.existsSync(path.join(root, "tasks")), "nothing was queued under the root")

    const cancelled = await callOk(session, CancelOutcome, "cancel", receiptArgs(other))
    assert.deepStrictEqual(cancelled, {
      task_id: other.task_id,
      cancelled: true,
      cancel_requested: false,
      state: "cancelled"
    })
    assert.strictEqual(await stateInPg("tools", other.task_id), "cancelled")

    const view = await callOk(session, TaskView, "read", receiptArgs(receipt))
    assert.strictEqual(view.state, "queued")
    assert.strictEqual(view.client_request_id, "mcp-1")
    const listed = await callOk(session, ListResult, "list", {})
    assert.deepStrictEqual(
      listed.tasks.map((task) => [task.task_id, task.state]),
      [
        [other.task_id, "cancelled"],
        [receipt.task_id, "queued"]
      ]
    )
    const onlyCancelled = await callOk(session, ListResult, "list", { state: "cancelled" })
    assert.deepStrictEqual(
      onlyCancelled.tasks.map((task) => task.task_id),
      [other.task_id]
    )
    await session.client.close()

    // Another server process, another session: the queue is the database, not the process.
    const later = await tasksServer("tools", mcp.tempDir())
    assert.deepStrictEqual(await callOk(later, TaskView, "read", receiptArgs(receipt)), view)
    assert.deepStrictEqual(await callOk(later, ListResult, "list", {}), listed)
    assert.deepStrictEqual(
      await callOk(later, Receipt, "submit", { client_request_id: "mcp-1", payload }),
      receipt,
      "the receipt survives the session"
    )
  })

  it("read with wait_seconds answers as soon as a worker in another process completes the task", async () => {
    const root = mcp.tempDir()
    const session = await tasksServer("wait", root)
    const payload = { message: "wait for me" }
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "wait-1", payload })

    const WaitSeconds = 30
    const WorkerDelayMillis = 1500
    const started = performance.now()
    const reading = call(
      session,
      "read",
      { ...receiptArgs(receipt), wait_seconds: WaitSeconds },
      { timeout: 60_000, resetTimeoutOnProgress: true, onprogress: () => undefined }
    )
    // The worker starts once the read is waiting: one pass, a process of its own.
    const pass = new Promise<void>((resolve) => setTimeout(resolve, WorkerDelayMillis)).then(() =>
      relaykeep(["worker", ...storeArgs("wait", mcp.tempDir())])
    )
    const [result, worker] = await Promise.all([reading, pass])
    const elapsed = performance.now() - started

    assert.deepStrictEqual(cliJson(PassReport, worker).dispatched, [receipt.task_id])
    const view = okResult(TaskView, result)
    assert.strictEqual(view.state, "complete")
    assert.deepStrictEqual(view.result, { echo: payload, provider: "fake-echo" })
    assert.isAtLeast(elapsed, WorkerDelayMillis, "the read waited for the worker")
    assert.isBelow(elapsed, 20_000, `answered when the task finished, not at the ${WaitSeconds} s limit`)
  })

  it("an MCP task made through one server process is run by a worker and answered by a new server process", async () => {
    const root = mcp.tempDir()
    const capabilities = { tasks: { list: {}, cancel: {} } }
    const first = await mcp.connect(relaykeepBin, ["tasks", ...storeArgs("native", root)], capabilities)
    let created: Task | undefined
    for await (const message of first.client.experimental.tasks.callToolStream(
      { name: "submit", arguments: { client_request_id: "native-pg", payload: { message: "on pg" } } },
      CallToolResultSchema,
      { task: { ttl: 90_000 } }
    )) {
      if (message.type !== "taskCreated") throw new Error(`expected taskCreated, got ${message.type}`)
      created = message.task
      break
    }
    const taskId = created?.taskId ?? ""
    const handle = parseHandle(taskId)
    if (handle._tag === "None") throw new Error(`not a handle: ${taskId}`)
    assert.strictEqual(created?.status, "working")
    assert.strictEqual(await stateInPg("native", handle.value.taskId), "queued", "the task is a row")
    await first.client.close()

    const pass = cliJson(PassReport, await relaykeep(["worker", ...storeArgs("native", mcp.tempDir())]))
    assert.deepStrictEqual(pass.dispatched, [handle.value.taskId])

    const second = await mcp.connect(relaykeepBin, ["tasks", ...storeArgs("native", root)], capabilities)
    const got = await second.client.experimental.tasks.getTask(taskId)
    assert.strictEqual(got.status, "completed")
    assert.strictEqual(got.ttl, 90_000, "the ttl is kept in the row")
    const result = await second.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)
    const view = okResult(TaskView, Schema.decodeUnknownSync(CallResult)(result))
    assert.deepStrictEqual(view.result, { echo: { message: "on pg" }, provider: "fake-echo" })
    const listed = await second.client.experimental.tasks.listTasks()
    assert.deepStrictEqual(
      listed.tasks.map((task) => task.taskId),
      [taskId]
    )
  })

  it("stdout carries JSON-RPC only, and the server exits 0 soon after stdin closes, even after a waiting read", async () => {
    const receipt = cliJson(
      Receipt,
      await relaykeep([
        "submit",
        ...storeArgs("stdio", mcp.tempDir()),
        "--id",
        "stdio-1",
        "--payload",
        '{"n":1}'
      ])
    )
    const server = spawnRaw(relaykeepBin, ["tasks", ...storeArgs("stdio", mcp.tempDir())])
    try {
      server.send(initializeRequest(1))
      await server.response(1)
      server.send(initializedNotification)
      // A read that waits subscribes to the queue's notifications: LISTEN on a connection of its own.
      server.send({
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "read", arguments: { ...receiptArgs(receipt), wait_seconds: 1 } }
      })
      await server.response(2)
      server.send({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "list", arguments: {} } })
      await server.response(3)
      server.closeStdin()
      const exit = await withTimeout(server.exited, ExitWithinMillis)
      assert.isDefined(exit, `the server still runs ${ExitWithinMillis} ms after stdin closed`)
      if (exit === undefined) return
      assert.strictEqual(exit.signal, null, `killed by ${exit.signal}; stderr: ${exit.stderr}`)
      assert.strictEqual(exit.code, 0, `exit code; stderr: ${exit.stderr}`)
      assert.deepStrictEqual(responseIds(exit), [1, 2, 3])
      const read = exit.stdoutLines.flatMap((line) => Option.toArray(decodeReadResponse(line)))
      assert.deepStrictEqual(
        read.map((response) => [
          response.result.structuredContent.task_id,
          response.result.structuredContent.state
        ]),
        [[receipt.task_id, "queued"]]
      )
    } finally {
      await server.kill()
    }
  })
})

/** "Soon": the server notices the closed stdin by itself; generous for a loaded machine. */
const ExitWithinMillis = 15_000

const decodeLine = Schema.decodeUnknownOption(JsonRpcLine, { onExcessProperty: "error" })

/** Every stdout line is one JSON-RPC message; the ids of the responses, in order. */
const responseIds = (exit: RawExit): ReadonlyArray<string | number | null> =>
  exit.stdoutLines.map((line) => {
    const message = decodeLine(line)
    assert.isTrue(Option.isSome(message), `stdout carries a line that is not JSON-RPC: ${line}`)
    return Option.match(message, {
      onNone: () => null,
      onSome: (value) => ("method" in value ? null : value.id)
    })
  })

const decodeReadResponse = Schema.decodeUnknownOption(
  Schema.parseJson(
    Schema.Struct({
      id: Schema.Literal(2),
      result: Schema.Struct({
        structuredContent: Schema.Struct({ task_id: Schema.String, state: Schema.String })
      })
    })
  )
)
