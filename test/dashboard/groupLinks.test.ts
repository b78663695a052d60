/**
 * How the page knows a broadcast (src/dashboard/page/broadcast.ts), checked against the domain
 * that makes one: a group record by its payload's reserved provider, a member by the request id
 * `memberRequestId` gives it; any other task leads to no group page.
 */
import { assert, describe, it } from "@effect/vitest"
import { groupOfRequestId, groupOfTask, GroupProvider } from "../../src/dashboard/page/broadcast.js"
import { groupPayload, memberRequestId } from "../../src/domain/broadcast.js"
import { TaskId } from "../../src/domain/ids.js"
import { BroadcastProvider } from "../../src/domain/mcpTask.js"

const groupId = TaskId.make("ab12".repeat(16))

describe("the page's view of a broadcast", () => {
  it("names the same reserved provider as the domain", () => {
    assert.strictEqual(GroupProvider, BroadcastProvider)
  })

  it("finds the group of every member's request id, and of no other", () => {
    for (const place of [0, 1, 7, 11])
      assert.strictEqual(groupOfRequestId(memberRequestId(groupId, place)), groupId)
    for (const requestId of [
      "",
      "broadcast",
      `broadcast:${groupId}`,
      `broadcast:${groupId}:`,
      `broadcast:${groupId}:0`,
      `broadcast:${groupId}:1x`,
      `broadcast:${groupId.toUpperCase()}:1`,
      `broadcast:${groupId}0:1`,
      `x-broadcast:${groupId}:1`
    ])
      assert.isNull(groupOfRequestId(requestId), requestId)
  })

  it("leads a group record to its own page and a member to its group's", () => {
    const payload = groupPayload([{ provider: "fake-echo", model: "a" }], { prompt: "p" })
    assert.deepStrictEqual(groupOfTask({ task_id: groupId, client_request_id: "mine", payload }), {
      _tag: "group",
      groupId
    })
    const member = { task_id: "cd34".repeat(16), client_request_id: memberRequestId(groupId, 0), payload: {} }
    assert.deepStrictEqual(groupOfTask(member), { _tag: "member", groupId })
    assert.isNull(
      groupOfTask({ task_id: groupId, client_request_id: "plain", payload: { provider: "claude" } })
    )
    assert.isNull(groupOfTask(null))
  })
})
