import { assert, describe, it } from "@effect/vitest"
import { statsOf } from "../../src/dashboard/stats.js"
import { ClientRequestId, PayloadSha256, TaskId } from "../../src/domain/ids.js"
import type { TaskState, TaskSummary } from "../../src/domain/Task.js"

const Hour = 3_600_000
const now = Date.parse("2026-11-30T12:30:00.000Z")

const task = (createdAgo: number, state: TaskState, finishedAgo: number | null): TaskSummary => ({
  task_id: TaskId.make("a".repeat(64)),
  client_request_id: ClientRequestId.make("x"),
  payload_sha256: PayloadSha256.make("b".repeat(64)),
  state,
  provider: null,
  created_at: new Date(now - createdAgo).toISOString(),
  updated_at: new Date(now).toISOString(),
  started_at: finishedAgo === null ? null : new Date(now - createdAgo).toISOString(),
  finished_at: finishedAgo === null ? null : new Date(now - finishedAgo).toISOString(),
  attempt: 1
})

describe("dashboard stats", () => {
  it("counts submissions by creation and outcomes by finish, in the hour, the day and hourly buckets", () => {
    const stats = statsOf(
      [
        task(10 * 60_000, "complete", 5 * 60_000),
        task(2 * Hour, "failed", 90 * 60_000),
        task(30 * Hour, "cancelled", 20 * Hour),
        task(3 * Hour, "queued", null),
        task(48 * Hour, "complete", 47 * Hour)
      ],
      now
    )
    assert.strictEqual(stats.now, "2026-11-30T12:30:00.000Z")
    assert.deepStrictEqual(stats.hour, { submitted: 1, complete: 1, failed: 0, cancelled: 0 })
    assert.deepStrictEqual(stats.day, { submitted: 3, complete: 1, failed: 1, cancelled: 1 })
    assert.strictEqual(stats.buckets.length, 24)
    assert.strictEqual(stats.buckets[0]?.start, "2026-11-29T13:00:00.000Z")
    assert.strictEqual(stats.buckets[23]?.start, "2026-11-30T12:00:00.000Z")
    assert.deepStrictEqual(stats.buckets[23], {
      start: "2026-11-30T12:00:00.000Z",
      submitted: 1,
      complete: 1,
      failed: 0,
      cancelled: 0
    })
    // Failed 90 minutes ago: 11:00; the cancel 20 hours ago: 16:30 yesterday.
    assert.strictEqual(stats.buckets[22]?.failed, 1)
    assert.strictEqual(stats.buckets[3]?.cancelled, 1)
    const total = stats.buckets.reduce((sum, b) => sum + b.submitted, 0)
    assert.strictEqual(total, 3)
  })
})
