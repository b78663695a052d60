/**
 * The retention contract (`TaskStore.collect`): every store removes the same finished tasks for
 * the same records, never a live one, and a removed task's request id makes a new task.
 * Time is the TestClock's, so finish times and cutoffs are exact.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Duration, Effect, Option, TestClock } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { Receipt } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"

const id = (text: string) => ClientRequestId.make(text)
const worker = { workerId: "w1", leaseMillis: 60_000 }
const Minute = 60_000

type End = "complete" | "failed" | "cancelled"

/** Submit a task and end it as asked, at the clock's current time. */
const finished = (store: TaskStoreShape, name: string, end: End, ttlMillis?: number | null) =>
  Effect.gen(function* () {
    const receipt = yield* store.submit({
      clientRequestId: id(name),
      payload: { name },
      ...(ttlMillis === undefined ? {} : { ttlMillis })
    })
    if (end === "cancelled") {
      yield* store.cancel(receipt.task_id, receipt.payload_sha256)
      return receipt
    }
    const claimed = yield* store.claim(receipt.task_id, worker)
    if (Option.isNone(claimed)) return yield* Effect.dieMessage(`${name}: not claimed`)
    if (end === "complete") yield* store.complete(receipt.task_id, claimed.value.lease, { name })
    else yield* store.fail(receipt.task_id, claimed.value.lease, { tag: "ProviderFailed", message: "boom" })
    return receipt
  })

const unknown = (store: TaskStoreShape, receipt: Receipt) =>
  Effect.map(Effect.flip(store.read(receipt.task_id, receipt.payload_sha256)), (error) => error._tag)

export const collectContract = (
  name: string,
  makeStore: () => Effect.Effect<TaskStoreShape, unknown, Scope.Scope>
) =>
  describe(`TaskStore collect contract: ${name}`, () => {
    const withStore = <A, E>(body: (store: TaskStoreShape) => Effect.Effect<A, E, Scope.Scope>) =>
      Effect.flatMap(makeStore(), body)

    it.scoped("removes finished tasks that finished before the cutoff, and never a live one", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const done = yield* finished(store, "done", "complete")
          const failed = yield* finished(store, "failed", "failed")
          const cancelled = yield* finished(store, "cancelled", "cancelled")
          // Live tasks as old as the finished ones: a queued one, and a running one.
          const queued = yield* store.submit({ clientRequestId: id("queued"), payload: {} })
          const running = yield* store.submit({ clientRequestId: id("running"), payload: {} })
          yield* store.claim(running.task_id, worker)
          yield* TestClock.adjust(Duration.minutes(10))
          const recent = yield* finished(store, "recent", "complete")
          yield* TestClock.adjust(Duration.minutes(1))

          const report = yield* store.collect({ finishedBefore: 5 * Minute })
          assert.isFalse(report.dry_run)
          assert.deepStrictEqual(report.invalid, [])
          // Oldest finished first, ties by task id: here all three finished at once.
          assert.deepStrictEqual(
            report.removed.map((task) => task.task_id),
            [done, failed, cancelled].map((receipt) => receipt.task_id).sort()
          )
          assert.deepStrictEqual(
            report.removed.map((task) => [task.client_request_id, task.state, task.finished_at]).sort(),
            [
              ["cancelled", "cancelled", "1970-01-01T00:00:00.000Z"],
              ["done", "complete", "1970-01-01T00:00:00.000Z"],
              ["failed", "failed", "1970-01-01T00:00:00.000Z"]
            ]
          )
          for (const gone of [done, failed, cancelled])
            assert.strictEqual(yield* unknown(store, gone), "UnknownTask")
          assert.strictEqual((yield* store.read(queued.task_id, queued.payload_sha256)).state, "queued")
          assert.strictEqual((yield* store.read(running.task_id, running.payload_sha256)).state, "running")
          assert.strictEqual((yield* store.read(recent.task_id, recent.payload_sha256)).state, "complete")
          const listed = (yield* store.list({})).tasks.map((task) => task.client_request_id)
          assert.deepStrictEqual([...listed].sort(), ["queued", "recent", "running"])
          assert.deepStrictEqual(yield* store.counts, {
            queued: 1,
            running: 1,
            complete: 1,
            failed: 0,
            cancelled: 0
          })
          const check = yield* store.check
          assert.strictEqual(check.records, 3)
          // Nothing is left to collect before that cutoff; a later one takes the recent task.
          assert.deepStrictEqual((yield* store.collect({ finishedBefore: 5 * Minute })).removed, [])
          const later = yield* store.collect({ finishedBefore: 11 * Minute })
          assert.deepStrictEqual(
            later.removed.map((task) => task.task_id),
            [recent.task_id]
          )
        })
      )
    )

    it.scoped("keep-last keeps the newest finished tasks, by finish time, however old", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipts: Array<Receipt> = []
          for (const n of [1, 2, 3, 4]) {
            receipts.push(yield* finished(store, `t${n}`, "complete"))
            yield* TestClock.adjust(Duration.minutes(1))
          }
          yield* TestClock.adjust(Duration.hours(1))
          const report = yield* store.collect({ finishedBefore: 30 * Minute, keepLast: 3 })
          assert.deepStrictEqual(
            report.removed.map((task) => task.client_request_id),
            ["t1"]
          )
          const none = yield* store.collect({ finishedBefore: 30 * Minute, keepLast: 3 })
          assert.deepStrictEqual(none.removed, [])
          const zero = yield* store.collect({ finishedBefore: 30 * Minute, keepLast: 0 })
          assert.deepStrictEqual(
            zero.removed.map((task) => task.client_request_id),
            ["t2", "t3", "t4"]
          )
        })
      )
    )

    it.scoped("a dry run reports what would go and removes nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const done = yield* finished(store, "done", "complete")
          yield* TestClock.adjust(Duration.minutes(10))
          const dry = yield* store.collect({ finishedBefore: 5 * Minute, dryRun: true })
          assert.isTrue(dry.dry_run)
          assert.deepStrictEqual(
            dry.removed.map((task) => task.task_id),
            [done.task_id]
          )
          assert.strictEqual((yield* store.read(done.task_id, done.payload_sha256)).state, "complete")
          assert.strictEqual((yield* store.list({})).tasks.length, 1)
          const real = yield* store.collect({ finishedBefore: 5 * Minute })
          assert.deepStrictEqual(real.removed, dry.removed)
        })
      )
    )

    it.scoped("a removed task's request id submitted again makes a new task, queued", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const old = yield* finished(store, "again", "complete")
          yield* TestClock.adjust(Duration.minutes(10))
          yield* store.collect({ finishedBefore: 5 * Minute })
          // The same payload: the same task id and hash, but a new record.
          const fresh = yield* store.submit({ clientRequestId: id("again"), payload: { name: "again" } })
          assert.strictEqual(fresh.task_id, old.task_id)
          assert.notStrictEqual(fresh.created_at, old.created_at)
          const view = yield* store.read(fresh.task_id, fresh.payload_sha256)
          assert.strictEqual(view.state, "queued")
          assert.strictEqual(view.attempt, 0)
          assert.deepStrictEqual(view.attempts, [])
          assert.isNull(view.result)
          const listed = (yield* store.list({})).tasks
          assert.deepStrictEqual(
            listed.map((task) => [task.task_id, task.state, task.created_at]),
            [[fresh.task_id, "queued", fresh.created_at]]
          )
          assert.strictEqual((yield* store.counts).queued, 1)
          assert.strictEqual((yield* store.counts).complete, 0)
          assert.deepStrictEqual((yield* store.live).queued, [fresh.task_id])
          // Another payload is no conflict now: the old one is gone, and its hash reads nothing.
          const other = yield* finished(store, "other", "complete")
          yield* TestClock.adjust(Duration.minutes(10))
          yield* store.collect({ finishedBefore: 15 * Minute })
          const changed = yield* store.submit({ clientRequestId: id("other"), payload: { changed: true } })
          assert.notStrictEqual(changed.payload_sha256, other.payload_sha256)
          const mismatch = yield* Effect.flip(store.read(other.task_id, other.payload_sha256))
          assert.strictEqual(mismatch._tag, "HashMismatch")
        })
      )
    )

    it.scoped("a ttl is a floor: kept until finished + ttl; a null ttl is kept always", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const short = yield* finished(store, "short", "complete", 20 * Minute)
          const unlimited = yield* finished(store, "unlimited", "complete", null)
          const plain = yield* finished(store, "plain", "complete")
          yield* TestClock.adjust(Duration.minutes(10))
          const first = yield* store.collect({ finishedBefore: 5 * Minute })
          assert.deepStrictEqual(
            first.removed.map((task) => task.task_id),
            [plain.task_id]
          )
          yield* TestClock.adjust(Duration.minutes(10))
          const second = yield* store.collect({ finishedBefore: 5 * Minute })
          assert.deepStrictEqual(
            second.removed.map((task) => task.task_id),
            [short.task_id]
          )
          yield* TestClock.adjust(Duration.days(365))
          assert.deepStrictEqual((yield* store.collect({ finishedBefore: 5 * Minute })).removed, [])
          assert.strictEqual(
            (yield* store.read(unlimited.task_id, unlimited.payload_sha256)).state,
            "complete"
          )
        })
      )
    )

    it.scoped("a retryable failure queued again is live, and never collected", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("retry"), payload: {} })
          const retry = { max_attempts: 2, backoff_initial_ms: 1_000, backoff_max_ms: 1_000 }
          const claimed = yield* store.claim(receipt.task_id, { ...worker, retry })
          if (Option.isNone(claimed)) return assert.fail("not claimed")
          const error = { tag: "ProviderTimeout", message: "slow", retryable: true }
          assert.strictEqual(yield* store.fail(receipt.task_id, claimed.value.lease, error), "queued")
          yield* TestClock.adjust(Duration.days(30))
          assert.deepStrictEqual(
            (yield* store.collect({ finishedBefore: 29 * 24 * 60 * Minute })).removed,
            []
          )
          assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "queued")
        })
      )
    )

    it.scoped("a broadcast goes whole: its group record and members together, never while one is live", () =>
      withStore((store) =>
        Effect.gen(function* () {
          // A member whose group record is gone, and a group whose record settles after one
          // member finished while the other is still queued.
          const orphan = yield* finished(store, `broadcast:${"a".repeat(64)}:1`, "complete")
          const group = yield* store.submit({ clientRequestId: id("group"), payload: { group: true } })
          const done = yield* finished(store, `broadcast:${group.task_id}:1`, "complete")
          const live = yield* store.submit({
            clientRequestId: id(`broadcast:${group.task_id}:2`),
            payload: {}
          })
          yield* TestClock.adjust(Duration.minutes(10))
          const claimed = yield* store.claim(group.task_id, worker)
          if (Option.isNone(claimed)) return yield* Effect.dieMessage("group: not claimed")
          const receiptOf = (member: Receipt) => ({ provider: "fake-echo", model: "m", ...member })
          yield* store.complete(group.task_id, claimed.value.lease, { members: [done, live].map(receiptOf) })
          yield* TestClock.adjust(Duration.minutes(10))

          // Past the group's end, but one member is queued: the group stays whole; the orphan goes.
          const first = yield* store.collect({ finishedBefore: 15 * Minute })
          assert.deepStrictEqual(
            first.removed.map((task) => task.task_id),
            [orphan.task_id]
          )
          assert.strictEqual((yield* store.read(done.task_id, done.payload_sha256)).state, "complete")
          assert.strictEqual((yield* store.read(group.task_id, group.payload_sha256)).state, "complete")
          // Once every part has finished before the cutoff, all of it goes at once.
          yield* store.cancel(live.task_id, live.payload_sha256)
          yield* TestClock.adjust(Duration.minutes(10))
          const second = yield* store.collect({ finishedBefore: 25 * Minute })
          assert.deepStrictEqual(
            second.removed.map((task) => task.task_id).sort(),
            [group.task_id, done.task_id, live.task_id].sort()
          )
        })
      )
    )

    it.scoped("bad input is refused naming the field, and removes nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const done = yield* finished(store, "done", "complete")
          yield* TestClock.adjust(Duration.minutes(10))
          for (const keepLast of [-1, 1.5]) {
            const refused = yield* Effect.flip(store.collect({ finishedBefore: 5 * Minute, keepLast }))
            assert.strictEqual(refused._tag, "InvalidInput")
            if (refused._tag === "InvalidInput") assert.strictEqual(refused.field, "keep_last")
          }
          const refused = yield* Effect.flip(store.collect({ finishedBefore: Number.NaN }))
          assert.strictEqual(refused._tag, "InvalidInput")
          assert.strictEqual((yield* store.read(done.task_id, done.payload_sha256)).state, "complete")
        })
      )
    )
  })
