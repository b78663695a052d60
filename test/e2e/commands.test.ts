/** The payload sources of submit, cancel, list and check, through the built binary. */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskState } from "../../src/domain/Task.js"
import { CancelOutcome, Receipt, TaskView } from "../../src/domain/Task.js"
import { PassReport } from "../../src/worker/pass.js"
import { CheckOutput, ListOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { sha256, useTempDirs } from "../support/files.js"

const tempDir = useTempDirs()

const submitInline = (root: string, id: string, payload: string) =>
  relaykeep(["submit", "--root", root, "--id", id, "--payload", payload])

describe("relaykeep submit, cancel, list, check", { timeout: 120_000 }, () => {
  it("--payload-file and --payload - give the receipt of --payload; key order does not change the hash", async () => {
    const root = tempDir()
    const canonical = '{"a":"hi","b":[1,{"x":"é","y":2}]}'
    const reordered = '{ "b": [1, {"y": 2, "x": "é"}],\n  "a": "hi" }\n'
    const file = path.join(tempDir(), "payload.json")
    fs.writeFileSync(file, reordered)

    const inline = await submitInline(root, "same", canonical)
    const receipt = jsonOutput(Receipt, inline)
    assert.strictEqual(receipt.payload_sha256, sha256(canonical))
    const [fromFile, fromStdin] = await Promise.all([
      relaykeep(["submit", "--root", root, "--id", "same", "--payload-file", file]),
      relaykeep(["submit", "--root", root, "--id", "same", "--payload", "-"], { stdin: reordered })
    ])
    jsonOutput(Receipt, fromFile)
    jsonOutput(Receipt, fromStdin)
    assert.strictEqual(fromFile.stdout, inline.stdout)
    assert.strictEqual(fromStdin.stdout, inline.stdout)

    // A new id with the keys in another order: a new task, the same payload hash.
    const [other, otherStdin] = await Promise.all([
      submitInline(root, "other", reordered),
      relaykeep(["submit", "--root", root, "--id", "other-stdin", "--payload", "-"], { stdin: canonical })
    ])
    for (const result of [other, otherStdin]) {
      const next = jsonOutput(Receipt, result)
      assert.notStrictEqual(next.task_id, receipt.task_id)
      assert.strictEqual(next.payload_sha256, receipt.payload_sha256)
    }
  })

  it("cancel: queued and already cancelled give cancelled: true; a complete task gives false and its state", async () => {
    const root = tempDir()
    const queued = jsonOutput(Receipt, await submitInline(root, "to-cancel", '{"job":1}'))
    const cancelArgs = ["cancel", "--root", root, "--task-id", queued.task_id, "--sha", queued.payload_sha256]
    const expected = { task_id: queued.task_id, cancelled: true, cancel_requested: false, state: "cancelled" }
    const first = await relaykeep(cancelArgs)
    assert.deepStrictEqual(jsonOutput(CancelOutcome, first), expected)
    const again = await relaykeep(cancelArgs)
    assert.deepStrictEqual(jsonOutput(CancelOutcome, again), expected)

    const done = jsonOutput(Receipt, await submitInline(root, "to-run", '{"job":2}'))
    const pass = jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
    assert.deepStrictEqual(pass.dispatched, [done.task_id])
    const late = await relaykeep([
      "cancel",
      "--root",
      root,
      "--task-id",
      done.task_id,
      "--sha",
      done.payload_sha256
    ])
    assert.deepStrictEqual(jsonOutput(CancelOutcome, late), {
      task_id: done.task_id,
      cancelled: false,
      cancel_requested: false,
      state: "complete"
    })

    const readState = (receipt: Receipt) =>
      relaykeep(["read", "--root", root, "--task-id", receipt.task_id, "--sha", receipt.payload_sha256]).then(
        (result) => jsonOutput(TaskView, result)
      )
    const [cancelled, complete] = await Promise.all([readState(queued), readState(done)])
    assert.strictEqual(cancelled.state, "cancelled")
    assert.deepStrictEqual(cancelled.attempts, [])
    assert.strictEqual(complete.state, "complete")
  })

  it("list shows tasks newest first, list --state filters, check reports a healthy root", async () => {
    const root = tempDir()
    const older = jsonOutput(Receipt, await submitInline(root, "older", '{"n":1}'))
    jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
    const newer = jsonOutput(Receipt, await submitInline(root, "newer", '{"n":2}'))

    const [all, queued, complete, check] = await Promise.all([
      relaykeep(["list", "--root", root]),
      relaykeep(["list", "--root", root, "--state", "queued"]),
      relaykeep(["list", "--root", root, "--state", "complete"]),
      relaykeep(["check", "--root", root])
    ])
    const summary = (receipt: Receipt, id: string, state: TaskState, attempt: number) => ({
      task_id: receipt.task_id,
      client_request_id: ClientRequestId.make(id),
      payload_sha256: receipt.payload_sha256,
      state,
      provider: null,
      created_at: receipt.created_at,
      attempt
    })
    // The times a worker stamps are checked for presence; their values depend on the run.
    const withoutUpdated = (output: typeof ListOutput.Type) => ({
      next_cursor: output.next_cursor,
      tasks: output.tasks.map(({ updated_at: _updated, started_at, finished_at, ...rest }) => {
        assert.strictEqual(started_at === null, rest.state === "queued")
        assert.strictEqual(finished_at === null, rest.state === "queued")
        return rest
      })
    })
    const newerQueued = summary(newer, "newer", "queued", 0)
    const olderComplete = summary(older, "older", "complete", 1)
    assert.deepStrictEqual(withoutUpdated(jsonOutput(ListOutput, all)), {
      next_cursor: null,
      tasks: [newerQueued, olderComplete]
    })
    assert.deepStrictEqual(withoutUpdated(jsonOutput(ListOutput, queued)), {
      next_cursor: null,
      tasks: [newerQueued]
    })
    assert.deepStrictEqual(withoutUpdated(jsonOutput(ListOutput, complete)), {
      next_cursor: null,
      tasks: [olderComplete]
    })
    assert.deepStrictEqual(jsonOutput(CheckOutput, check), {
      ok: true,
      records: 2,
      states: { queued: 1, running: 0, complete: 1, failed: 0, cancelled: 0 },
      invalid_records: []
    })
  })
})
