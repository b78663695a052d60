/** The queue's contract over MCP: submit, read, cancel, list, their typed errors, and bad arguments. */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { CancelOutcome, Receipt, TaskSummary, TaskView } from "../../../src/domain/Task.js"
import { call, callError, callOk, errorResult, useMcpTest } from "../../support/mcpStdio.js"

const mcp = useMcpTest()

const ListResult = Schema.Struct({
  tasks: Schema.Array(TaskSummary),
  next_cursor: Schema.NullOr(Schema.String)
})
const hexOf = (char: string) => char.repeat(64)

describe("relaykeep-tasks contract", () => {
  it("submit answers the receipt as structuredContent and as the same JSON text; resubmit is identical", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const args = { client_request_id: "req-1", payload: { prompt: "hello", n: [1, 2] } }
    const first = await call(session, "submit", args)
    const receipt = Schema.decodeUnknownSync(Receipt)(first.structuredContent)
    assert.deepStrictEqual(Object.keys(first.structuredContent ?? {}), [
      "task_id",
      "payload_sha256",
      "created_at"
    ])
    assert.deepStrictEqual(first.content, [{ type: "text", text: JSON.stringify(first.structuredContent) }])
    assert.isTrue(fs.existsSync(path.join(root, "tasks", `${receipt.task_id}.json`)), "the record is on disk")

    // The same request, from a new session too: byte-identical answers.
    const again = await call(session, "submit", args)
    assert.deepStrictEqual(again, first)
    const other = await mcp.tasks(root)
    assert.deepStrictEqual(await call(other, "submit", args), first)

    const view = await callOk(session, TaskView, "read", {
      task_id: receipt.task_id,
      payload_sha256: receipt.payload_sha256
    })
    assert.strictEqual(view.state, "queued")
    assert.strictEqual(view.client_request_id, "req-1")
    assert.strictEqual(view.attempt, 0)
  })

  it("a different payload under the same id is a ConflictError and changes nothing", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const receipt = await callOk(session, Receipt, "submit", {
      client_request_id: "req-1",
      payload: { a: 1 }
    })
    const record = fs.readFileSync(path.join(root, "tasks", `${receipt.task_id}.json`))
    const message = await callError(session, "ConflictError", "submit", {
      client_request_id: "req-1",
      payload: { a: 2 }
    })
    assert.include(message, receipt.task_id)
    assert.deepStrictEqual(fs.readFileSync(path.join(root, "tasks", `${receipt.task_id}.json`)), record)
    assert.deepStrictEqual(
      await callOk(session, Receipt, "submit", { client_request_id: "req-1", payload: { a: 1 } }),
      receipt
    )
  })

  it("read: an unknown task is UnknownTask, a wrong hash is HashMismatch", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "r", payload: { x: 1 } })
    await callError(session, "UnknownTask", "read", { task_id: hexOf("a"), payload_sha256: hexOf("b") })
    const wrong = receipt.payload_sha256 === hexOf("c") ? hexOf("d") : hexOf("c")
    await callError(session, "HashMismatch", "read", { task_id: receipt.task_id, payload_sha256: wrong })
    await callError(session, "HashMismatch", "cancel", { task_id: receipt.task_id, payload_sha256: wrong })
  })

  it("cancel of a queued task: cancelled, and again the same answer", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "c", payload: { x: 1 } })
    const args = { task_id: receipt.task_id, payload_sha256: receipt.payload_sha256 }
    const first = await callOk(session, CancelOutcome, "cancel", args)
    assert.deepStrictEqual(first, {
      task_id: receipt.task_id,
      cancelled: true,
      cancel_requested: false,
      state: "cancelled"
    })
    assert.deepStrictEqual(await callOk(session, CancelOutcome, "cancel", args), first)
    assert.strictEqual((await callOk(session, TaskView, "read", args)).state, "cancelled")
  })

  it("list: newest first, by state, a page at a time", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    const receipts: Array<Receipt> = []
    for (const id of ["first", "second", "third"])
      receipts.push(await callOk(session, Receipt, "submit", { client_request_id: id, payload: { id } }))
    // Newest first: by created_at, descending; submissions within one millisecond tie, and
    // ties go by task id, descending (the store's documented order).
    const expected = [...receipts]
      .sort((a, b) =>
        a.created_at === b.created_at
          ? a.task_id < b.task_id
            ? 1
            : -1
          : a.created_at < b.created_at
            ? 1
            : -1
      )
      .map((receipt) => receipt.task_id)
    const all = await callOk(session, ListResult, "list", {})
    assert.deepStrictEqual(
      all.tasks.map((task) => task.task_id),
      expected
    )
    assert.strictEqual(all.next_cursor, null)
    const [, middle] = receipts
    assert.isDefined(middle)
    if (middle === undefined) return
    await callOk(session, CancelOutcome, "cancel", {
      task_id: middle.task_id,
      payload_sha256: middle.payload_sha256
    })
    const cancelled = await callOk(session, ListResult, "list", { state: "cancelled" })
    assert.deepStrictEqual(
      cancelled.tasks.map((task) => [task.client_request_id, task.state]),
      [["second", "cancelled"]]
    )

    const page1 = await callOk(session, ListResult, "list", { limit: 2 })
    assert.isNotNull(page1.next_cursor)
    const page2 = await callOk(session, ListResult, "list", { limit: 2, cursor: page1.next_cursor ?? "" })
    assert.strictEqual(page2.next_cursor, null)
    assert.deepStrictEqual(
      [...page1.tasks, ...page2.tasks].map((task) => task.task_id),
      expected
    )
  })

  it("malformed arguments are InvalidArguments naming the field, and reach nothing", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const task = { task_id: hexOf("a"), payload_sha256: hexOf("b") }
    const cases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
      ["submit", { payload: { x: 1 } }, "client_request_id"],
      ["submit", { client_request_id: "r" }, "payload"],
      ["submit", { client_request_id: "r", payload: {}, priority: 1 }, "priority"],
      ["submit", { client_request_id: 5, payload: {} }, "client_request_id"],
      ["submit", { client_request_id: "", payload: {} }, "client_request_id"],
      ["submit", { client_request_id: "r", payload: [1] }, "payload"],
      ["read", { ...task, task_id: "not-a-task-id" }, "task_id"],
      ["read", { ...task, payload_sha256: hexOf("B") }, "payload_sha256"],
      ["read", { ...task, wait_seconds: "5" }, "wait_seconds"],
      ["read", { ...task, wait_seconds: -1 }, "wait_seconds"],
      ["cancel", { task_id: hexOf("a") }, "payload_sha256"],
      ["cancel", { ...task, force: true }, "force"],
      ["list", { state: "done" }, "state"],
      ["list", { limit: 0 }, "limit"],
      ["list", { limit: 1.5 }, "limit"]
    ]
    for (const [tool, args, field] of cases) {
      const message = await callError(session, "InvalidArguments", tool, args)
      assert.include(message, field, `${tool} ${JSON.stringify(args)}`)
    }
    // None of them touched the queue: the root is not even opened by a rejected call.
    const tasks = path.join(root, "tasks")
    assert.deepStrictEqual(fs.existsSync(tasks) ? fs.readdirSync(tasks) : [], [])
    errorResult(await call(session, "no_such_tool", {}), "UnknownTool")
  })

  it("a damaged record is InvalidRecord over MCP, and is left as it is", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "d", payload: { x: 1 } })
    const file = path.join(root, "tasks", `${receipt.task_id}.json`)
    fs.writeFileSync(file, "{not json")
    const args = { task_id: receipt.task_id, payload_sha256: receipt.payload_sha256 }
    const message = await callError(session, "InvalidRecord", "read", args)
    assert.include(message, receipt.task_id)
    await callError(session, "InvalidRecord", "cancel", args)
    await callError(session, "InvalidRecord", "submit", { client_request_id: "d", payload: { x: 1 } })
    assert.strictEqual(fs.readFileSync(file, "utf8"), "{not json")
  })
})
