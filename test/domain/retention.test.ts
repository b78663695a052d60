/** The pure choice of a collection: a broadcast goes whole, group records first. */
import { assert, describe, it } from "@effect/vitest"
import { ClientRequestId, PayloadSha256, TaskId } from "../../src/domain/ids.js"
import { chooseCollectable, namedByGroups, waitsForGroup } from "../../src/domain/retention.js"
import type { RecordHead, TaskState } from "../../src/domain/Task.js"

const at = (minute: number) => new Date(minute * 60_000).toISOString()

const head = (
  name: string,
  state: TaskState,
  finishedMinute: number,
  options: { readonly requestId?: string; readonly result?: unknown } = {}
): RecordHead => ({
  schema_version: 1,
  task_id: TaskId.make(name.repeat(64).slice(0, 64)),
  client_request_id: ClientRequestId.make(options.requestId ?? name),
  payload_sha256: PayloadSha256.make("0".repeat(64)),
  state,
  created_at: at(0),
  updated_at: at(finishedMinute),
  started_at: null,
  finished_at: state === "queued" || state === "running" ? null : at(finishedMinute),
  attempt: 0,
  lease: null,
  result: options.result ?? null,
  error: null,
  attempts: []
})

const group = head("a", "complete", 10)
const memberOf = (name: string, state: TaskState, minute: number, index: number) =>
  head(name, state, minute, { requestId: `broadcast:${group.task_id}:${index}` })

describe("chooseCollectable", () => {
  it("takes a group and its members together, the group record first", () => {
    const members = [memberOf("b", "complete", 1, 1), memberOf("c", "failed", 2, 2)]
    const plain = head("d", "complete", 3)
    const chosen = chooseCollectable([...members, plain, group], { finishedBefore: 20 * 60_000 }, 0)
    assert.deepStrictEqual(
      chosen.map((record) => record.task_id),
      // Newest finished first within each part.
      [group.task_id, plain.task_id, ...members.map((member) => member.task_id).reverse()]
    )
  })

  it("keeps the whole group while any part of it is live, too new or kept by keep-last", () => {
    const cases = [
      [memberOf("b", "complete", 1, 1), memberOf("c", "running", 0, 2)],
      [memberOf("b", "complete", 1, 1), memberOf("c", "complete", 30, 2)]
    ]
    for (const members of cases)
      assert.deepStrictEqual(chooseCollectable([...members, group], { finishedBefore: 20 * 60_000 }, 0), [])
    // keep-last 1 keeps the newest finished: the group record, and so its member.
    const member = memberOf("b", "complete", 1, 1)
    assert.deepStrictEqual(
      chooseCollectable([member, group], { finishedBefore: 20 * 60_000, keepLast: 1 }, 0),
      []
    )
  })

  it("a member whose group record is gone goes with its siblings", () => {
    const first = memberOf("b", "complete", 1, 1)
    const request = { finishedBefore: 20 * 60_000 }
    assert.lengthOf(chooseCollectable([first, memberOf("c", "complete", 2, 2)], request, 0), 2)
    assert.lengthOf(chooseCollectable([first, memberOf("c", "queued", 0, 2)], request, 0), 0)
  })
})

describe("namedByGroups and waitsForGroup", () => {
  it("names the groups of members and the members a settled group lists, beyond the heads given", () => {
    const live = TaskId.make("e".repeat(64))
    const settled = head("a", "complete", 10, {
      result: {
        members: [
          {
            provider: "fake-echo",
            model: "m",
            task_id: live,
            payload_sha256: "0".repeat(64),
            created_at: at(0)
          }
        ]
      }
    })
    assert.deepStrictEqual(namedByGroups([settled]), [live])
    const member = head("b", "complete", 1, { requestId: `broadcast:${"f".repeat(64)}:1` })
    assert.deepStrictEqual(namedByGroups([member]), ["f".repeat(64)])
    assert.deepStrictEqual(namedByGroups([head("d", "complete", 1)]), [])
  })

  it("a member waits while its chosen group record has not been removed", () => {
    const member = memberOf("b", "complete", 1, 1)
    const chosen = new Set<string>([group.task_id, member.task_id])
    assert.isTrue(waitsForGroup(member, chosen, new Set()))
    assert.isFalse(waitsForGroup(member, chosen, new Set([group.task_id])))
    assert.isFalse(waitsForGroup(member, new Set([member.task_id]), new Set()), "its group was not chosen")
    assert.isFalse(waitsForGroup(head("d", "complete", 1), chosen, new Set()))
  })
})
