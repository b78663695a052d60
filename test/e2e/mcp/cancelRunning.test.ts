/**
 * Cancelling a running task over MCP: the real `relaykeep-tasks` stdio server with the SDK
 * client, and a real `relaykeep worker --watch` running the scripted fake claude. The cancel
 * tool answers `cancel_requested`, and the worker stops the provider and records `cancelled`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as path from "node:path"
import { CancelOutcome, Receipt, TaskView } from "../../../src/domain/Task.js"
import { isRunning } from "../../support/fakeCli.js"
import { callOk, useMcpTest } from "../../support/mcpStdio.js"
import { effectsIn, useScriptedWorkers } from "../../support/scriptedWorker.js"
import { waitFor } from "../../support/waitFor.js"

// Registered before the scripted workers' afterEach, so it runs after it: workers die before their roots go.
const mcp = useMcpTest()
const { startWorker } = useScriptedWorkers()

const JsonSchemaObject = Schema.Struct({
  type: Schema.Literal("object"),
  required: Schema.Array(Schema.String),
  properties: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})
const ArrayOfObjects = Schema.Struct({ type: Schema.Literal("array"), items: JsonSchemaObject })

describe("cancel over MCP", { timeout: 300_000 }, () => {
  it("tools/list: cancel promises cancel_requested for running tasks; read shows the retry fields and late outcomes", async () => {
    const session = await mcp.tasks(path.join(mcp.tempDir(), "root"))
    const { tools } = await session.client.listTools()
    const cancel = tools.find((tool) => tool.name === "cancel")
    const read = tools.find((tool) => tool.name === "read")

    assert.include(cancel?.description ?? "", "cancel_requested")
    assert.include(cancel?.description ?? "", "running task")
    assert.deepStrictEqual(cancel?.annotations, {
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: true,
      openWorldHint: false
    })
    const cancelOutput = Schema.decodeUnknownSync(JsonSchemaObject)(cancel?.outputSchema)
    assert.deepStrictEqual(
      Object.keys(cancelOutput.properties).sort(),
      ["cancel_requested", "cancelled", "state", "task_id"],
      "the cancel outcome's fields"
    )
    assert.deepStrictEqual([...cancelOutput.required].sort(), [
      "cancel_requested",
      "cancelled",
      "state",
      "task_id"
    ])
    // A boolean, described for the model that reads it.
    assert.deepInclude(cancelOutput.properties["cancel_requested"], { type: "boolean" })
    assert.include(JSON.stringify(cancelOutput.properties["cancel_requested"]), "asked to stop it")

    const readOutput = Schema.decodeUnknownSync(JsonSchemaObject)(read?.outputSchema)
    for (const key of ["max_attempts", "not_before", "cancel_requested_at"]) {
      assert.property(readOutput.properties, key)
      assert.include(readOutput.required, key)
    }
    const attempts = Schema.decodeUnknownSync(ArrayOfObjects)(readOutput.properties["attempts"])
    assert.property(attempts.items.properties, "late", "an attempt may carry a late outcome")
    assert.notInclude(attempts.items.required, "late", "late is optional")
  })

  it("a running task: cancel answers cancel_requested, read shows the request, then the task reads cancelled", async () => {
    const dir = mcp.tempDir()
    const root = path.join(dir, "root")
    const effects = path.join(dir, "effects.jsonl")
    const session = await mcp.tasks(root)
    const receipt = await callOk(session, Receipt, "submit", {
      client_request_id: "long-task",
      payload: { provider: "claude", model: "sonnet", prompt: JSON.stringify({ sleep_ms: 60_000 }) }
    })
    const byReceipt = { task_id: receipt.task_id, payload_sha256: receipt.payload_sha256 }

    const worker = startWorker(root, dir, effects)
    const provider = await waitFor(
      () => `the provider to start (worker stderr: ${worker.stderr()})`,
      () =>
        effectsIn(effects).find((effect) => effect.event === "start" && effect.task_id === receipt.task_id)
    )

    // The SDK client checks every structured result against the tool's advertised outputSchema.
    const outcome = await callOk(session, CancelOutcome, "cancel", byReceipt)
    assert.deepStrictEqual(outcome, {
      task_id: receipt.task_id,
      cancelled: false,
      cancel_requested: true,
      state: "running"
    })

    const requested = await callOk(session, TaskView, "read", byReceipt)
    assert.isNotNull(requested.cancel_requested_at, "the request is visible at once")
    assert.include(["running", "cancelled"], requested.state)

    const final = await callOk(session, TaskView, "read", { ...byReceipt, wait_seconds: 30 })
    assert.strictEqual(final.state, "cancelled", "the worker stopped the task")
    assert.strictEqual(final.cancel_requested_at, requested.cancel_requested_at)
    assert.isNull(final.result)
    assert.isNull(final.error)
    assert.deepStrictEqual(
      final.attempts.map((attempt) => [attempt.attempt, attempt.outcome]),
      [[1, "cancelled"]]
    )
    await waitFor("the provider to be stopped", () => (isRunning(provider.pid) ? undefined : true), 60_000)
    assert.isFalse(
      effectsIn(effects).some((effect) => effect.event === "done"),
      "the provider never got to finish"
    )

    assert.deepStrictEqual(await callOk(session, CancelOutcome, "cancel", byReceipt), {
      task_id: receipt.task_id,
      cancelled: true,
      cancel_requested: false,
      state: "cancelled"
    })
    const summary = await worker.stop()
    assert.deepStrictEqual(summary, {
      reason: "SIGINT",
      finished: 0,
      failed: 0,
      retried: 0,
      cancelled: 1,
      released: 0,
      reaped: 0
    })
  })
})
