/**
 * broadcast and read_group over stdio: the SDK client against the built relaykeep-tasks, a real
 * worker pass running the members, and the CLI reading the same group from the same root.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Progress } from "@modelcontextprotocol/sdk/types.js"
import { performance } from "node:perf_hooks"
import { GroupReceipt, GroupView } from "../../../src/domain/broadcast.js"
import { TaskView } from "../../../src/domain/Task.js"
import { PassReport } from "../../../src/worker/pass.js"
import { call, callError, callOk, okResult, useMcpTest } from "../../support/mcpStdio.js"
import { cliFailure, cliJson, relaykeep } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

const targets = [
  { provider: "fake-echo", model: "a" },
  { provider: "fake-echo", model: "b" }
]

/** The deliberate delay before the worker starts, so that read_group is already waiting. */
const WorkerDelayMillis = 1000

describe("broadcast over MCP", { timeout: 120_000 }, () => {
  it("queues one task per target, answers the same receipt again, and read_group waits for a real worker", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const args = { client_request_id: "opinions-1", targets, payload: { prompt: "review this diff" } }
    const receipt = await callOk(session, GroupReceipt, "broadcast", args)
    assert.deepStrictEqual(
      receipt.members.map((member) => `${member.provider}:${member.model}`),
      ["fake-echo:a", "fake-echo:b"]
    )
    assert.deepStrictEqual(await callOk(session, GroupReceipt, "broadcast", args), receipt)

    const progress: Array<Progress> = []
    const started = performance.now()
    const reading = call(
      session,
      "read_group",
      { group_id: receipt.group_id, payload_sha256: receipt.payload_sha256, wait_seconds: 20 },
      { onprogress: (update) => progress.push(update), timeout: 30_000 }
    )
    const worker = new Promise<void>((resolve) => setTimeout(resolve, WorkerDelayMillis)).then(() =>
      relaykeep(["worker", "--root", root])
    )
    const [result, pass] = await Promise.all([reading, worker])
    const elapsed = performance.now() - started

    // The worker ran both members and never the group record.
    assert.deepStrictEqual(
      [...cliJson(PassReport, pass).dispatched].sort(),
      receipt.members.map((member) => member.task_id).sort()
    )
    const view = okResult(GroupView, result)
    assert.strictEqual(view.state, "complete")
    assert.deepStrictEqual(view.counts, { queued: 0, running: 0, complete: 2, failed: 0, cancelled: 0 })
    assert.deepStrictEqual(
      view.members.map((member) => member.result),
      [
        { echo: { prompt: "review this diff", provider: "fake-echo", model: "a" }, provider: "fake-echo" },
        { echo: { prompt: "review this diff", provider: "fake-echo", model: "b" }, provider: "fake-echo" }
      ]
    )
    assert.isAtLeast(elapsed, WorkerDelayMillis, "read_group waited for the worker")
    assert.isBelow(elapsed, 18_000, "it answered when the members finished, not at the 20 s limit")
    assert.isAtLeast(progress.length, 1, "progress notifications while waiting")
    for (const update of progress) assert.strictEqual(update.total, 20)

    // Each member is an ordinary task: read answers it by its own receipt.
    const [first] = receipt.members
    if (first === undefined) return assert.fail("a member")
    const member = await callOk(session, TaskView, "read", {
      task_id: first.task_id,
      payload_sha256: first.payload_sha256
    })
    assert.strictEqual(member.state, "complete")

    // The CLI reads the same group from the same root.
    const cli = cliJson(
      GroupView,
      await relaykeep(["read", "--root", root, "--group", receipt.group_id, "--sha", receipt.payload_sha256])
    )
    assert.deepStrictEqual(cli, view)
  })

  it("a conflict, bad targets, a wrong hash and a task that is no group are refused, naming what is wrong", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const receipt = await callOk(session, GroupReceipt, "broadcast", {
      client_request_id: "opinions-2",
      targets,
      payload: { prompt: "p" }
    })
    assert.include(
      await callError(session, "ConflictError", "broadcast", {
        client_request_id: "opinions-2",
        targets,
        payload: { prompt: "another" }
      }),
      receipt.group_id
    )
    assert.strictEqual(
      await callError(session, "InvalidArguments", "broadcast", {
        client_request_id: "opinions-3",
        targets: [...targets, targets[0]],
        payload: { prompt: "p" }
      }),
      "targets: must not name the same provider and model twice"
    )
    assert.include(
      await callError(session, "InvalidArguments", "broadcast", {
        client_request_id: "opinions-3",
        targets: [{ provider: "claude", model: "opus" }],
        payload: { prompt: "p", temperature: 0 }
      }),
      "payload: for entry 1 (claude): temperature: is unexpected"
    )
    assert.strictEqual(
      await callError(session, "HashMismatch", "read_group", {
        group_id: receipt.group_id,
        payload_sha256: "0".repeat(64)
      }),
      `payload_sha256 does not match task ${receipt.group_id}`
    )
    const [first] = receipt.members
    if (first === undefined) return assert.fail("a member")
    await callError(session, "NotAGroup", "read_group", {
      group_id: first.task_id,
      payload_sha256: first.payload_sha256
    })
    // A plain submit may not name the reserved provider.
    assert.include(
      await callError(session, "InvalidArguments", "submit", {
        client_request_id: "forged-group",
        payload: { provider: "broadcast", targets, payload: {} }
      }),
      "provider: broadcast is reserved"
    )
    // Nor take a member's request id before its broadcast does: through MCP or the CLI.
    const memberId = `broadcast:${receipt.group_id}:3`
    assert.strictEqual(
      await callError(session, "InvalidArguments", "submit", {
        client_request_id: memberId,
        payload: { prompt: "squat" }
      }),
      "client_request_id: must not start with broadcast:, which is reserved for the members of a broadcast"
    )
    assert.include(
      cliFailure(
        await relaykeep(["submit", "--root", root, "--id", memberId, "--payload", '{"prompt":"squat"}']),
        2,
        "InvalidInput"
      ),
      "--id: must not start with broadcast:"
    )
    const listed = cliJson(
      TaskView,
      await relaykeep(["read", "--root", root, "--task-id", first.task_id, "--sha", first.payload_sha256])
    )
    assert.strictEqual(listed.state, "queued", "nothing refused changed the members")
    cliFailure(
      await relaykeep(["read", "--root", root, "--group", first.task_id, "--sha", first.payload_sha256]),
      1,
      "NotAGroup"
    )
  })
})
