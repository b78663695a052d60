/** What the PostgreSQL store remembers of live tasks: bounded, and never a finished task. */
import { assert, describe, it } from "@effect/vitest"
import { ClientRequestId, TaskId } from "../../src/domain/ids.js"
import type { TaskRecord } from "../../src/domain/Task.js"
import * as Transitions from "../../src/domain/transitions.js"
import { rememberedRows } from "../../src/store/postgres/remembered.js"

const recordOf = (n: number): TaskRecord =>
  Transitions.newRecord({
    taskId: TaskId.make(n.toString(16).padStart(64, "0")),
    clientRequestId: ClientRequestId.make(`r${n}`),
    payload: { n },
    payloadSha256: Transitions.payloadSha256({ n }),
    now: 0
  })

describe("remembered rows", () => {
  it("keeps the latest record and revision of a live task", () => {
    const rows = rememberedRows(4)
    const record = recordOf(1)
    rows.set(record, "1", false)
    rows.set({ ...record, updated_at: "later" }, "2", true)
    assert.deepStrictEqual(rows.get(record.task_id), {
      record: { ...record, updated_at: "later" },
      revision: "2",
      payloadStored: true
    })
  })

  it("forgets a task once a write finishes it, and on request", () => {
    const rows = rememberedRows(4)
    const [done, dropped] = [recordOf(1), recordOf(2)]
    rows.set(done, "1", true)
    rows.set(dropped, "1", true)
    rows.set(Transitions.cancel(done, 1).next ?? done, "2", true)
    rows.forget(dropped.task_id)
    assert.isUndefined(rows.get(done.task_id), "a cancelled task is not remembered")
    assert.isUndefined(rows.get(dropped.task_id))
  })

  it("holds at most its capacity, forgetting the least recently written first", () => {
    const rows = rememberedRows(3)
    const records = [1, 2, 3, 4].map(recordOf)
    for (const record of records.slice(0, 3)) rows.set(record, "0", true)
    // Written again, so it is the newest: the next one in pushes out task 2.
    const first = records[0]
    if (first !== undefined) rows.set(first, "1", true)
    const last = records[3]
    if (last !== undefined) rows.set(last, "0", true)
    assert.deepStrictEqual(
      records.map((record) => rows.get(record.task_id)?.revision),
      ["1", undefined, "0", "0"]
    )
  })
})
