/** The pure parts of a broadcast: targets as the CLI spells them, member payloads and ids, group state. */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import {
  countsOf,
  groupOfMember,
  groupStateOf,
  memberPayloads,
  memberRequestId,
  parseTargets
} from "../../src/domain/broadcast.js"
import { MaxKeyChars, TaskId } from "../../src/domain/ids.js"
import { checkRequestId } from "../../src/domain/mcpTask.js"

const fields = { targets: "--broadcast", payload: "--payload" }

const refusal = <A>(result: Either.Either<A, { readonly field: string; readonly reason: string }>) =>
  Either.match(result, {
    onLeft: (error) => `${error.field}: ${error.reason}`,
    onRight: () => "accepted"
  })

describe("broadcast targets", () => {
  it("provider:model pairs split at commas, each at its first colon", () => {
    assert.deepStrictEqual(
      parseTargets("claude:opus, codex:gpt-5,ollama:llama3.1:8b", "--broadcast"),
      Either.right([
        { provider: "claude", model: "opus" },
        { provider: "codex", model: "gpt-5" },
        { provider: "ollama", model: "llama3.1:8b" }
      ])
    )
  })

  it("a malformed entry, a repeat or too many are refused naming the flag and the entry", () => {
    assert.strictEqual(
      refusal(parseTargets("claude", "--broadcast")),
      "--broadcast: entry 1 must be provider:model"
    )
    assert.strictEqual(
      refusal(parseTargets("claude:a,:b", "--broadcast")),
      "--broadcast: entry 2 must be provider:model"
    )
    assert.strictEqual(
      refusal(parseTargets("claude:a,", "--broadcast")),
      "--broadcast: entry 2 must be provider:model"
    )
    assert.strictEqual(
      refusal(parseTargets("claude:a,claude:a", "--broadcast")),
      "--broadcast: must not name the same provider and model twice"
    )
    assert.strictEqual(
      refusal(parseTargets(Array.from({ length: 9 }, (_, i) => `fake-echo:m${i}`).join(","), "--broadcast")),
      "--broadcast: must name 1 to 8 targets"
    )
    assert.include(
      refusal(parseTargets("cl aude:a", "--broadcast")),
      "--broadcast: entry 1 provider: must be"
    )
  })
})

describe("member payloads", () => {
  const targets = [
    { provider: "claude", model: "opus" },
    { provider: "fake-echo", model: "x" }
  ]

  it("the shared part with each target's provider and model", () => {
    assert.deepStrictEqual(
      Either.map(memberPayloads(targets, { prompt: "p", work_dir: "/w" }, fields), (members) =>
        members.map((member) => member.payload)
      ),
      Either.right([
        { prompt: "p", work_dir: "/w", provider: "claude", model: "opus" },
        { prompt: "p", work_dir: "/w", provider: "fake-echo", model: "x" }
      ])
    )
  })

  it("refuses what a worker would refuse, before anything is stored", () => {
    assert.strictEqual(
      refusal(memberPayloads(targets, { prompt: "p", provider: "codex" }, fields)),
      "--payload: must not name provider: each target names its own provider and model"
    )
    assert.include(
      refusal(memberPayloads(targets, { prompt: "p", temperature: 1 }, fields)),
      "--payload: for entry 1 (claude): "
    )
    assert.include(
      refusal(memberPayloads([{ provider: "ollama", model: "m" }], { prompt: "p", work_dir: "/w" }, fields)),
      "--payload: for entry 1 (ollama)"
    )
    assert.include(refusal(memberPayloads(targets, {}, fields)), "prompt")
    assert.strictEqual(
      refusal(memberPayloads([{ provider: "mcp-tool", model: "m" }], { prompt: "p" }, fields)),
      "--broadcast: entry 1 (mcp-tool): provider: mcp-tool is reserved for the tasks an MCP server runs itself"
    )
    // A provider this side does not know may be a worker's own: its payload is not judged here.
    assert.strictEqual(
      refusal(memberPayloads([{ provider: "mine", model: "m" }], { any: 1 }, fields)),
      "accepted"
    )
  })

  it("member request ids are derived from the group and fit a request id", () => {
    const id = memberRequestId(TaskId.make("a".repeat(64)), 7)
    assert.strictEqual(id, `broadcast:${"a".repeat(64)}:8`)
    assert.isAtMost(id.length, MaxKeyChars)
  })
})

describe("group state", () => {
  it("running while any member is live; complete when all completed; else failed", () => {
    assert.strictEqual(groupStateOf(["complete", "queued"]), "running")
    assert.strictEqual(groupStateOf(["failed", "running"]), "running")
    assert.strictEqual(groupStateOf(["complete", "complete"]), "complete")
    assert.strictEqual(groupStateOf(["complete", "cancelled"]), "failed")
    assert.strictEqual(groupStateOf(["failed"]), "failed")
    assert.deepStrictEqual(countsOf(["complete", "failed", "complete"]), {
      queued: 0,
      running: 0,
      complete: 2,
      failed: 1,
      cancelled: 0
    })
  })
})

describe("member request ids", () => {
  it("only a member's id names its group, and no client may choose one", () => {
    const group = TaskId.make("b".repeat(64))
    assert.strictEqual(groupOfMember(memberRequestId(group, 0)), group)
    assert.strictEqual(groupOfMember(memberRequestId(group, 7)), group)
    for (const other of [
      "broadcast:",
      `broadcast:${group}`,
      `broadcast:${group}:0`,
      `broadcast:${group}:1x`,
      "opinions"
    ])
      assert.isUndefined(groupOfMember(other), other)
    assert.strictEqual(
      refusal(checkRequestId(memberRequestId(group, 0))),
      "client_request_id: must not start with broadcast:, which is reserved for the members of a broadcast"
    )
    assert.strictEqual(refusal(checkRequestId("broadcast:anything", "--id")).slice(0, 5), "--id:")
    assert.strictEqual(refusal(checkRequestId("opinions")), "accepted")
  })
})
