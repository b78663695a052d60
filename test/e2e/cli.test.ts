/** The CLI round trip through the built binaries: submit, worker pass, read, and both worker bins. */
import { assert, describe, it } from "@effect/vitest"
import { PassReport } from "../../src/worker/pass.js"
import { Receipt, TaskView } from "../../src/domain/Task.js"
import { failureOutput, jsonOutput, outputKeys, relaykeep, relaykeepWorker } from "../support/cli.js"
import { recordFiles, sha256, useTempDirs } from "../support/files.js"

const tempDir = useTempDirs()
const passKeys = [
  "dispatched",
  "invalid_records",
  "limit_reached",
  "lost",
  "reaped",
  "unknown_running",
  "waiting",
  "worker_pid"
]

describe("relaykeep end to end", { timeout: 120_000 }, () => {
  it("submit, one worker pass, read: the echo result; a second pass dispatches nothing", async () => {
    const root = tempDir()
    const payload = { message: "hello", n: [1, 2] }
    const submitted = await relaykeep([
      "submit",
      "--root",
      root,
      "--id",
      "req-1",
      "--payload",
      '{"n":[1,2],"message":"hello"}'
    ])
    const receipt = jsonOutput(Receipt, submitted)
    assert.deepStrictEqual(outputKeys(submitted), ["created_at", "payload_sha256", "task_id"])
    assert.strictEqual(receipt.payload_sha256, sha256('{"message":"hello","n":[1,2]}'))
    assert.deepStrictEqual(recordFiles(root), [`${receipt.task_id}.json`])

    const readArgs = ["read", "--root", root, "--task-id", receipt.task_id, "--sha", receipt.payload_sha256]
    const queued = jsonOutput(TaskView, await relaykeep(readArgs))
    assert.strictEqual(queued.state, "queued")
    assert.strictEqual(queued.attempt, 0)

    const firstPass = await relaykeep(["worker", "--root", root])
    assert.deepStrictEqual(outputKeys(firstPass), passKeys)
    const first = jsonOutput(PassReport, firstPass)
    assert.deepStrictEqual(first.dispatched, [receipt.task_id])
    assert.deepStrictEqual(
      [first.invalid_records, first.lost, first.unknown_running, first.reaped],
      [[], [], [], []]
    )
    assert.isAbove(first.worker_pid, 0)
    assert.notStrictEqual(first.worker_pid, process.pid)

    const readAgain = await relaykeep(readArgs)
    const done = jsonOutput(TaskView, readAgain)
    assert.strictEqual(done.state, "complete")
    assert.deepStrictEqual(done.result, { echo: payload, provider: "fake-echo" })
    assert.strictEqual(done.error, null)
    assert.strictEqual(done.attempt, 1)
    assert.strictEqual(done.attempts.length, 1)
    assert.strictEqual(done.attempts[0]?.outcome, "complete")
    assert.strictEqual(done.attempts[0]?.pid, first.worker_pid)
    // Reading has no side effects: the same bytes every time.
    assert.strictEqual((await relaykeep(readArgs)).stdout, readAgain.stdout)

    const second = jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
    assert.deepStrictEqual(second.dispatched, [])
    assert.deepStrictEqual(second.invalid_records, [])
  })

  it("worker --limit N runs the oldest N and exits; the next pass runs the rest", async () => {
    const root = tempDir()
    const receipts: Array<Receipt> = []
    for (const id of ["first", "second", "third"])
      receipts.push(
        jsonOutput(
          Receipt,
          await relaykeep(["submit", "--root", root, "--id", id, "--payload", `{"id":"${id}"}`])
        )
      )
    const limited = jsonOutput(PassReport, await relaykeep(["worker", "--root", root, "--limit", "2"]))
    assert.deepStrictEqual(
      limited.dispatched,
      receipts.slice(0, 2).map((receipt) => receipt.task_id)
    )
    assert.isTrue(limited.limit_reached)
    const rest = jsonOutput(PassReport, await relaykeep(["worker", "--root", root, "--limit", "2"]))
    assert.deepStrictEqual(
      rest.dispatched,
      receipts.slice(2).map((receipt) => receipt.task_id)
    )
    assert.isFalse(rest.limit_reached)
  })

  it("relaykeep-worker --root R is relaykeep worker --root R", async () => {
    const root = tempDir()
    const submit = (id: string) =>
      relaykeep(["submit", "--root", root, "--id", id, "--payload", `{"id":"${id}"}`]).then((result) =>
        jsonOutput(Receipt, result)
      )
    const a = await submit("a")
    const viaBin = await relaykeepWorker(["--root", root])
    assert.deepStrictEqual(outputKeys(viaBin), passKeys)
    assert.deepStrictEqual(jsonOutput(PassReport, viaBin).dispatched, [a.task_id])
    const b = await submit("b")
    const viaCommand = jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
    assert.deepStrictEqual(viaCommand.dispatched, [b.task_id])
    const viewOf = (receipt: Receipt) =>
      relaykeep(["read", "--root", root, "--task-id", receipt.task_id, "--sha", receipt.payload_sha256]).then(
        (result) => jsonOutput(TaskView, result)
      )
    assert.deepStrictEqual((await viewOf(a)).result, { echo: { id: "a" }, provider: "fake-echo" })
    assert.deepStrictEqual((await viewOf(b)).result, { echo: { id: "b" }, provider: "fake-echo" })

    // Bad options fail the same way through either entry point.
    const [binError, commandError] = await Promise.all([
      relaykeepWorker(["--root", root, "--lease", "soon"]),
      relaykeep(["worker", "--root", root, "--lease", "soon"])
    ])
    const message = failureOutput(binError, 2, "UsageError")
    assert.include(message, "--lease")
    assert.deepStrictEqual(binError, commandError)
  })
})
