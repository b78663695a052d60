/**
 * Cancelling a running task over MCP: the real `relaykeep-tasks` stdio server with the SDK
 * client, and a real `relaykeep worker --watch` running the scripted fake claude. The cancel
 * tool answers `cancel_requested`, and the worker stops the provider and records `cancelled`.
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { ChildProcess } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { CancelOutcome, Receipt, TaskView } from "../../../src/domain/Task.js"
import { WatchSummary } from "../../../src/worker/watch.js"
import { fakeClaude, isRunning } from "../../support/fakeCli.js"
import { relaykeepBin } from "../../support/mcpProcess.js"
import { callOk, useMcpTest } from "../../support/mcpStdio.js"
import { spawnEnv } from "../../support/environment.js"
import { waitFor } from "../../support/waitFor.js"

// Registered before our own afterEach, so it runs after it: workers die before their roots go.
const mcp = useMcpTest()

const workers: Array<ChildProcess> = []
const effectFiles: Array<string> = []

const FakeEffect = Schema.parseJson(
  Schema.Struct({
    event: Schema.Literal("start", "done"),
    task_id: Schema.NullOr(Schema.String),
    attempt: Schema.Int,
    pid: Schema.Int,
    at: Schema.Number
  })
)
const effectsIn = (file: string) =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => Schema.decodeUnknownSync(FakeEffect)(line))
    : []

/** SIGKILL `pid` only while it still runs the fake provider. */
const killFake = (pid: number) => {
  if (!isRunning(pid)) return
  try {
    if (fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("fake-claude")) process.kill(pid, "SIGKILL")
  } catch {
    // Gone meanwhile.
  }
}

afterEach(async () => {
  for (const worker of workers.splice(0)) {
    if (worker.exitCode === null && worker.signalCode === null) {
      worker.kill("SIGKILL")
      await new Promise((resolve) => worker.once("close", resolve))
    }
  }
  for (const file of effectFiles.splice(0)) for (const effect of effectsIn(file)) killFake(effect.pid)
})

/** `relaykeep worker --watch` with the scripted fake as claude; its output captured. */
const startWorker = (root: string, dir: string, effects: string) => {
  const workDir = path.join(dir, "work")
  fs.mkdirSync(workDir, { recursive: true })
  const child = spawn(
    process.execPath,
    [
      relaykeepBin,
      "worker",
      "--watch",
      "--root",
      root,
      "--claude-executable",
      fakeClaude,
      "--work-dir",
      workDir,
      "--kill-grace",
      "2s",
      "--log-format",
      "json"
    ],
    {
      env: spawnEnv({
        PATH: `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
        FAKE_SCENARIO: "scripted",
        FAKE_EFFECTS: effects,
        FAKE_PIDS_DIR: dir,
        FAKE_LIFETIME_MS: "60000"
      }),
      stdio: ["ignore", "pipe", "pipe"]
    }
  )
  workers.push(child)
  effectFiles.push(effects)
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (code) => resolve(code))
  })
  const pid = child.pid
  if (pid === undefined) throw new Error("the worker did not start")
  return {
    pid,
    stderr: () => stderr,
    /** SIGINT; the worker drains and prints one WatchSummary. */
    stop: async () => {
      process.kill(pid, "SIGINT")
      assert.strictEqual(await exited, 0, `exit code after SIGINT (stderr: ${stderr})`)
      assert.match(stdout, /^[^\n]+\n$/, "stdout is one line")
      return Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })(stdout)
    }
  }
}

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
