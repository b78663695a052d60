/** read with wait_seconds: it answers when the task finishes, with progress, or when time is up. */
import { assert, describe, it } from "@effect/vitest"
import type { Progress } from "@modelcontextprotocol/sdk/types.js"
import { performance } from "node:perf_hooks"
import { Receipt, TaskView } from "../../../src/domain/Task.js"
import { PassReport } from "../../../src/worker/pass.js"
import { call, callError, callOk, okResult, useMcpTest } from "../../support/mcpStdio.js"
import { cliJson, relaykeep } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

/** The deliberate delay before a worker starts, so that the read is already waiting. */
const WorkerDelayMillis = 1000

describe("read with wait_seconds", () => {
  it("waits for a worker started later, sends progress, and answers complete well before the limit", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const payload = { message: "wait for me" }
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "w-1", payload })

    const progress: Array<Progress> = []
    const started = performance.now()
    const reading = call(
      session,
      "read",
      { task_id: receipt.task_id, payload_sha256: receipt.payload_sha256, wait_seconds: 20 },
      { onprogress: (update) => progress.push(update), timeout: 30_000 }
    )
    const worker = new Promise<void>((resolve) => setTimeout(resolve, WorkerDelayMillis)).then(() =>
      relaykeep(["worker", "--root", root])
    )
    const [result, pass] = await Promise.all([reading, worker])
    const elapsed = performance.now() - started

    assert.deepStrictEqual(cliJson(PassReport, pass).dispatched, [receipt.task_id])
    const view = okResult(TaskView, result)
    assert.strictEqual(view.state, "complete")
    assert.deepStrictEqual(view.result, { echo: payload, provider: "fake-echo" })
    assert.isAtLeast(elapsed, WorkerDelayMillis, "the read waited for the worker")
    assert.isBelow(elapsed, 18_000, "the read answered when the task finished, not at the 20 s limit")

    assert.isAtLeast(progress.length, 1, "progress notifications while waiting")
    for (const update of progress) assert.strictEqual(update.total, 20, "total is the wait in seconds")
  })

  it("on a task nobody runs, answers queued once wait_seconds have passed", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "w-2", payload: { x: 1 } })
    const started = performance.now()
    const view = await callOk(session, TaskView, "read", {
      task_id: receipt.task_id,
      payload_sha256: receipt.payload_sha256,
      wait_seconds: 1
    })
    const elapsed = performance.now() - started
    assert.strictEqual(view.state, "queued")
    assert.isAtLeast(elapsed, 1000)
    assert.isBelow(elapsed, 10_000)
  })

  it("progress values increase with each notification, as MCP requires", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "w-4", payload: { x: 1 } })
    const progress: Array<Progress> = []
    const result = await call(
      session,
      "read",
      { task_id: receipt.task_id, payload_sha256: receipt.payload_sha256, wait_seconds: 2 },
      { onprogress: (update) => progress.push(update), timeout: 30_000 }
    )
    assert.strictEqual(okResult(TaskView, result).state, "queued")
    const values = progress.map((update) => update.progress)
    assert.isAtLeast(values.length, 2, "a two-second wait reports progress more than once")
    // MCP, utilities/progress: "The progress value MUST increase with each notification."
    values.forEach((value, i) => {
      if (i > 0) assert.isAbove(value, values[i - 1] ?? -1, `progress values: ${JSON.stringify(values)}`)
    })
  })

  it("wait_seconds above 60 is InvalidArguments, answered at once", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "w-3", payload: { x: 1 } })
    const started = performance.now()
    const message = await callError(session, "InvalidArguments", "read", {
      task_id: receipt.task_id,
      payload_sha256: receipt.payload_sha256,
      wait_seconds: 61
    })
    assert.include(message, "wait_seconds")
    assert.isBelow(performance.now() - started, 5000)
  })
})
