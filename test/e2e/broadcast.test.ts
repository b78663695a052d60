/** `relaykeep submit --broadcast` and `relaykeep read --group` through the built binary, with a real worker pass. */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import { GroupReceipt, GroupView } from "../../src/domain/broadcast.js"
import { PassReport } from "../../src/worker/pass.js"
import { failureOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { recordFiles, recordPath, useTempDirs } from "../support/files.js"

const tempDir = useTempDirs()

/** Every record's bytes under the root: what a refused request must leave exactly as it was. */
const snapshot = (root: string) =>
  recordFiles(root).map((name) => [
    name,
    fs.readFileSync(recordPath(root, name.replace(/\.json$/, "")), "utf8")
  ])

describe("relaykeep submit --broadcast and read --group", { timeout: 120_000 }, () => {
  it("queues the group, answers the same receipt again, and reads every member side by side once a worker ran them", async () => {
    const root = tempDir()
    const submit = [
      "submit",
      "--root",
      root,
      "--id",
      "cli-opinions",
      "--broadcast",
      "fake-echo:a, fake-echo:b",
      "--payload",
      "-"
    ]
    const first = await relaykeep(submit, { stdin: '{"prompt":"second opinion"}' })
    const receipt = jsonOutput(GroupReceipt, first)
    assert.strictEqual(receipt.members.length, 2)
    assert.strictEqual(recordFiles(root).length, 3, "the group record and two members")
    const again = await relaykeep(submit, { stdin: '{ "prompt": "second opinion" }' })
    assert.strictEqual(again.stdout, first.stdout, "the same group receipt, byte for byte")

    const read = ["read", "--root", root, "--group", receipt.group_id, "--sha", receipt.payload_sha256]
    const queued = jsonOutput(GroupView, await relaykeep(read))
    assert.strictEqual(queued.state, "running")
    assert.deepStrictEqual(
      queued.members.map((member) => [member.model, member.state]),
      [
        ["a", "queued"],
        ["b", "queued"]
      ]
    )

    const pass = jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
    assert.strictEqual(pass.dispatched.length, 2, "the worker ran the members, not the group record")
    const done = jsonOutput(GroupView, await relaykeep([...read, "--wait", "10s"]))
    assert.strictEqual(done.state, "complete")
    assert.deepStrictEqual(
      done.members.map((member) => member.result),
      [
        { echo: { prompt: "second opinion", provider: "fake-echo", model: "a" }, provider: "fake-echo" },
        { echo: { prompt: "second opinion", provider: "fake-echo", model: "b" }, provider: "fake-echo" }
      ]
    )
  })

  it("refuses bad input naming the flag, and a conflict changes nothing", async () => {
    const root = tempDir()
    const base = ["submit", "--root", root, "--id", "cli-conflict"]
    const receipt = jsonOutput(
      GroupReceipt,
      await relaykeep([...base, "--broadcast", "fake-echo:a,fake-echo:b", "--payload", '{"prompt":"p"}'])
    )
    const before = snapshot(root)

    assert.include(
      failureOutput(
        await relaykeep([...base, "--broadcast", "fake-echo:a", "--payload", '{"prompt":"p"}']),
        1,
        "ConflictError"
      ),
      receipt.group_id
    )
    assert.strictEqual(
      failureOutput(
        await relaykeep([...base, "--broadcast", "claude", "--payload", "{}"]),
        2,
        "InvalidInput"
      ),
      "--broadcast: entry 1 must be provider:model"
    )
    assert.strictEqual(
      failureOutput(
        await relaykeep([
          ...base,
          "--broadcast",
          "fake-echo:a",
          "--payload",
          '{"prompt":"p","provider":"x"}'
        ]),
        2,
        "InvalidInput"
      ),
      "--payload: must not name provider: each target names its own provider and model"
    )
    assert.strictEqual(
      failureOutput(
        await relaykeep([
          "read",
          "--root",
          root,
          "--task-id",
          receipt.group_id,
          "--sha",
          receipt.payload_sha256,
          "--wait",
          "5s"
        ]),
        2,
        "InvalidInput"
      ),
      "--wait: applies to --group only"
    )
    assert.include(
      failureOutput(
        await relaykeep(["read", "--root", root, "--group", receipt.group_id, "--sha", "0".repeat(64)]),
        1,
        "HashMismatch"
      ),
      receipt.group_id
    )
    assert.deepStrictEqual(snapshot(root), before)
  })
})
