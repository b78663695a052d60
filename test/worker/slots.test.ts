/** The watching worker's slot and cap bookkeeping (src/worker/slots.ts), as pure functions. */
import { assert, describe, it } from "@effect/vitest"
import { TaskId } from "../../src/domain/ids.js"
import type { RunningSet } from "../../src/worker/slots.js"
import {
  attemptKey,
  claimAgainWhenFreed,
  roomOf,
  runningPerProvider,
  withClaimed,
  withoutAttempt,
  withoutInServerTasks
} from "../../src/worker/slots.js"
import { BroadcastProvider, InProcessProvider } from "../../src/domain/mcpTask.js"

const task = (n: number) => TaskId.make(n.toString(16).padStart(64, "0"))
const runningOf = (...providers: ReadonlyArray<string>): RunningSet =>
  new Map(providers.map((provider, n) => [attemptKey({ taskId: task(n), attempt: 1 }), provider]))
const caps = (entries: Record<string, number>) => new Map(Object.entries(entries))

describe("worker slots", () => {
  it("an idle worker may claim `concurrency` tasks, with each capped provider's whole cap", () => {
    const room = roomOf(new Map(), { concurrency: 4, maxPerProvider: caps({ claude: 1, codex: 2 }) })
    assert.strictEqual(room.limit, 4)
    assert.deepStrictEqual(
      [...room.room],
      [
        ["claude", 1],
        ["codex", 2],
        ["mcp-tool", 0],
        ["broadcast", 0]
      ]
    )
  })

  it("running attempts take from the total and from their provider's cap, never below zero", () => {
    const running = runningOf("claude", "claude", "fake-echo")
    assert.deepStrictEqual(
      [...runningPerProvider(running)],
      [
        ["claude", 2],
        ["fake-echo", 1]
      ]
    )
    // Two claude attempts under a cap of 1 (the cap was lowered by a restart): no room, not -1.
    const room = roomOf(running, { concurrency: 4, maxPerProvider: caps({ claude: 1, codex: 2 }) })
    assert.strictEqual(room.limit, 1)
    assert.deepStrictEqual(
      [...room.room],
      [
        ["claude", 0],
        ["codex", 2],
        ["mcp-tool", 0],
        ["broadcast", 0]
      ]
    )
  })

  it("a worker never asks for tasks an MCP server runs itself, and their lack of room is no reason to claim again", () => {
    const asked = roomOf(runningOf(), { concurrency: 2, maxPerProvider: new Map() })
    assert.strictEqual(asked.room.get(InProcessProvider), 0)
    // Nothing claimed from an empty queue: a freed slot waits for a wake-up.
    assert.isFalse(claimAgainWhenFreed(asked, []))
    assert.strictEqual(withoutInServerTasks(new Map([["claude", 1]])).get(InProcessProvider), 0)
  })

  it("a worker never asks for broadcast group records either", () => {
    const asked = roomOf(runningOf(), { concurrency: 2, maxPerProvider: new Map() })
    assert.strictEqual(asked.room.get(BroadcastProvider), 0)
    assert.isFalse(claimAgainWhenFreed(asked, []))
    assert.strictEqual(withoutInServerTasks(new Map()).get(BroadcastProvider), 0)
  })

  it("a full worker may claim nothing, whatever its caps", () => {
    const room = roomOf(runningOf("a", "b"), { concurrency: 2, maxPerProvider: caps({ c: 3 }) })
    assert.strictEqual(room.limit, 0)
    // More running than slots (concurrency lowered): still zero, not negative.
    assert.strictEqual(
      roomOf(runningOf("a", "b", "c"), { concurrency: 2, maxPerProvider: new Map() }).limit,
      0
    )
  })

  it("claimed attempts are added, ended ones removed, and the input is never changed", () => {
    const before = runningOf("a")
    const after = withClaimed(before, [{ taskId: task(9), attempt: 1, provider: "b" }])
    assert.strictEqual(before.size, 1)
    assert.deepStrictEqual([...after.values()], ["a", "b"])
    const ended = withoutAttempt(after, { taskId: task(0), attempt: 1 })
    assert.deepStrictEqual([...ended.keys()], [attemptKey({ taskId: task(9), attempt: 1 })])
    assert.strictEqual(after.size, 2)
    // Removing an attempt that is not there gives the same set back.
    assert.strictEqual(withoutAttempt(ended, { taskId: task(5), attempt: 1 }), ended)
  })

  it("a task claimed again while its last attempt winds down holds two slots until that one ends", () => {
    const limits = { concurrency: 2, maxPerProvider: caps({ claude: 1 }) }
    // Attempt 1 failed and sent the task back; a freed slot claimed it again (attempt 2) before
    // attempt 1 gave its own slot back.
    const both = withClaimed(runningOf(), [
      { taskId: task(1), attempt: 1, provider: "claude" },
      { taskId: task(1), attempt: 2, provider: "claude" }
    ])
    assert.strictEqual(roomOf(both, limits).limit, 0)
    // The old attempt ends: the new one still holds its slot and the provider's whole cap.
    const after = withoutAttempt(both, { taskId: task(1), attempt: 1 })
    const room = roomOf(after, limits)
    assert.strictEqual(room.limit, 1)
    assert.strictEqual(room.room.get("claude"), 0)
  })

  describe("whether a freed slot claims at once", () => {
    it("yes when the claim filled every slot it asked for: more may be ready", () => {
      assert.isTrue(claimAgainWhenFreed({ limit: 2, room: new Map() }, ["a", "b"]))
    })

    it("no when it got fewer than it asked for and no cap held anything back", () => {
      assert.isFalse(claimAgainWhenFreed({ limit: 3, room: new Map() }, ["a"]))
      assert.isFalse(claimAgainWhenFreed({ limit: 3, room: caps({ claude: 2 }) }, ["claude"]))
    })

    it("yes when a capped provider was left with no room: its tasks may wait for their own slot", () => {
      // claude had one slot of room and took it: a claude task may still be queued.
      assert.isTrue(claimAgainWhenFreed({ limit: 3, room: caps({ claude: 1 }) }, ["claude"]))
      // claude had no room at all: its tasks were passed over.
      assert.isTrue(claimAgainWhenFreed({ limit: 3, room: caps({ claude: 0 }) }, []))
    })
  })
})
