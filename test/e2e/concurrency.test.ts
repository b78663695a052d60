/** Many processes on one root: concurrent identical submits, and several workers at once. */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Receipt, TaskRecord } from "../../src/domain/Task.js"
import { PassReport } from "../../src/worker/pass.js"
import { CheckOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { recordFiles, recordPath, useTempDirs } from "../support/files.js"
import { seedTasks } from "../support/stores.js"

const tempDir = useTempDirs()
const Submitters = 50
const Workers = 4
const Tasks = 300

const decodeRecord = Schema.decodeUnknownSync(Schema.parseJson(TaskRecord))

describe("relaykeep under concurrency", { timeout: 300_000 }, () => {
  it(`${Submitters} concurrent identical submits leave one record and ${Submitters} identical receipts`, async () => {
    // An opened root, so this is about submit; concurrent first opens are in root.test.ts.
    const root = tempDir()
    await seedTasks(root, [])
    const args = ["submit", "--root", root, "--id", "one-and-only", "--payload", '{"n":1}']
    const results = await Promise.all(Array.from({ length: Submitters }, () => relaykeep(args)))
    assert.deepStrictEqual(
      results
        .filter((result) => result.code !== 0)
        .map((result) => `exit ${result.code ?? result.signal}: ${result.stderr}`),
      [],
      "every submit succeeds"
    )
    const receipts = results.map((result) => jsonOutput(Receipt, result))
    const first = results[0]?.stdout
    assert.deepStrictEqual(
      results.filter((result) => result.stdout !== first),
      [],
      "every receipt is byte-identical"
    )
    const taskId = receipts[0]?.task_id
    assert.deepStrictEqual(fs.readdirSync(path.join(root, "tasks")), [`${taskId}.json`])
    assert.strictEqual(fs.readdirSync(path.join(root, "index", "queued")).length, 1)
  })

  it(`${Workers} workers at once on ${Tasks} tasks dispatch each exactly once`, async () => {
    const root = tempDir()
    const receipts = await seedTasks(
      root,
      Array.from({ length: Tasks }, (_, i) => ({ id: `task-${i}`, payload: { i } }))
    )
    const expected = receipts.map((receipt) => receipt.task_id).sort()
    assert.strictEqual(new Set(expected).size, Tasks)

    const passes = (
      await Promise.all(Array.from({ length: Workers }, () => relaykeep(["worker", "--root", root])))
    ).map((result) => jsonOutput(PassReport, result))
    assert.strictEqual(new Set(passes.map((pass) => pass.worker_pid)).size, Workers)
    for (const pass of passes) assert.deepStrictEqual(pass.invalid_records, [])

    const dispatched = passes.flatMap((pass) => pass.dispatched)
    assert.strictEqual(dispatched.length, Tasks, "no task dispatched twice, none left out")
    assert.deepStrictEqual([...dispatched].sort(), expected)

    // Each record shows one attempt, by the worker that reported dispatching it.
    const dispatcher = new Map(
      passes.flatMap((pass) => pass.dispatched.map((taskId) => [taskId, pass.worker_pid] as const))
    )
    assert.strictEqual(recordFiles(root).length, Tasks)
    for (const taskId of expected) {
      const record = decodeRecord(fs.readFileSync(recordPath(root, taskId), "utf8"))
      assert.strictEqual(record.state, "complete", taskId)
      assert.strictEqual(record.attempt, 1, taskId)
      assert.strictEqual(record.attempts.length, 1, taskId)
      assert.strictEqual(record.attempts[0]?.outcome, "complete", taskId)
      assert.strictEqual(record.attempts[0]?.pid, dispatcher.get(taskId), taskId)
      assert.deepStrictEqual(record.result, { echo: record.payload, provider: "fake-echo" })
    }

    const check = jsonOutput(CheckOutput, await relaykeep(["check", "--root", root]))
    assert.isTrue(check.ok)
    assert.deepStrictEqual(check.invalid_records, [])
    assert.strictEqual(check.records, Tasks)
    assert.strictEqual(check.states.complete, Tasks)
  })
})
