/**
 * A collection on the file store against crashes and racing writers: whatever step a process
 * dies at, the next process finds every record whole, the index agreeing with the records, and
 * a removed request id free for a new task; a resubmit that meets a record being removed makes a
 * new task instead of failing.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import { Clock, Deferred, Duration, Effect, Fiber, Option, TestClock } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { Receipt } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { None } from "../support/FaultyFileSystem.js"
import { faultyFileStoreAt, fileStoreAt, tempDir } from "../support/stores.js"

const worker = { workerId: "w1", leaseMillis: 3_600_000 }
const id = (name: string) => ClientRequestId.make(name)

/** Two complete, one cancelled, one queued and one running task, all at the clock's time. */
const populate = (store: TaskStoreShape) =>
  Effect.gen(function* () {
    const submit = (name: string) => store.submit({ clientRequestId: id(name), payload: { name } })
    const finished: Array<{ readonly name: string; readonly receipt: Receipt }> = []
    for (const name of ["done-1", "done-2"]) {
      const receipt = yield* submit(name)
      const claimed = yield* store.claim(receipt.task_id, worker)
      if (Option.isNone(claimed)) return yield* Effect.dieMessage("not claimed")
      yield* store.complete(receipt.task_id, claimed.value.lease, { name })
      finished.push({ name, receipt })
    }
    const cancelled = yield* submit("cancelled")
    yield* store.cancel(cancelled.task_id, cancelled.payload_sha256)
    finished.push({ name: "cancelled", receipt: cancelled })
    const queued = yield* submit("queued")
    const running = yield* submit("running")
    yield* store.claim(running.task_id, worker)
    return { finished, live: [queued, running] }
  })

/**
 * What the next process sees: the index agrees with the records, nothing is damaged. The list
 * and the counts are read first, from the index as the crash left it: `check` rebuilds it.
 */
const consistent = (store: TaskStoreShape) =>
  Effect.gen(function* () {
    const listed = yield* store.list({ limit: 500 })
    const counts = yield* store.counts
    const check = yield* store.check
    assert.deepStrictEqual(check.invalid_records, [])
    assert.strictEqual(listed.tasks.length, check.records)
    assert.deepStrictEqual(counts, check.states)
    return new Map(listed.tasks.map((task) => [task.task_id, task.state]))
  })

describe("file store collection", () => {
  it.scoped(
    "a process killed at any step of a collection leaves a root the next process reads right",
    () =>
      Effect.gen(function* () {
        // One root made once, at one time, then copied for each crash: every copy holds the
        // same records, three of them finished before the cutoff.
        const template = yield* tempDir
        const { finished, live } = yield* populate(yield* fileStoreAt(template, { pid: 1001 }))
        yield* TestClock.adjust(Duration.minutes(10))
        const cutoff = (yield* Clock.currentTimeMillis) - 5 * 60_000
        const copy = Effect.map(tempDir, (root) => {
          fs.cpSync(template, root, { recursive: true })
          return root
        })

        // First a clean run, to learn how many changes to the disk a collection makes.
        const counting = yield* faultyFileStoreAt(yield* copy, { pid: 1001 })
        yield* counting.plan.arm(None)
        const clean = yield* counting.store.collect({ finishedBefore: cutoff })
        assert.strictEqual(clean.removed.length, 3)
        const mutations = (yield* counting.plan.counts).mutations
        assert.isAbove(mutations, 3)

        for (let n = 0; n <= mutations; n++) {
          const root = yield* copy
          const { store, plan } = yield* faultyFileStoreAt(root, { pid: 1001 })
          yield* plan.arm({ _tag: "CrashAfter", mutations: n })
          yield* Effect.either(store.collect({ finishedBefore: cutoff }))

          // The next process on this machine (the crashed one's pid is gone).
          const next = yield* fileStoreAt(root, { pid: 2002 })
          const states = yield* consistent(next)
          for (const receipt of live)
            assert.isTrue(states.has(receipt.task_id), `live task kept (crash after ${n})`)
          const gone = finished.filter(({ receipt }) => !states.has(receipt.task_id))
          // Past its last change the collection is whole: every finished task is gone.
          if (n === mutations) assert.lengthOf(gone, 3, "a collection that ended removed all three")
          for (const { receipt } of finished) {
            const read = yield* Effect.either(next.read(receipt.task_id, receipt.payload_sha256))
            if (read._tag === "Right") assert.strictEqual(states.get(receipt.task_id), read.right.state)
            else assert.strictEqual(read.left._tag, "UnknownTask")
          }
          // Every removed request id makes a new task, which the index lists as queued.
          yield* TestClock.adjust(Duration.seconds(1))
          for (const { name, receipt } of gone) {
            const again = yield* next.submit({ clientRequestId: id(name), payload: { name } })
            assert.strictEqual(again.task_id, receipt.task_id)
            assert.notStrictEqual(again.created_at, receipt.created_at)
          }
          const after = yield* consistent(next)
          for (const { receipt } of gone) assert.strictEqual(after.get(receipt.task_id), "queued")
        }
      }),
    240_000
  )

  it.live("a resubmit that meets the record while a collection removes it makes a new task", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const setUp = Effect.gen(function* () {
          const root = yield* tempDir
          const collector = yield* faultyFileStoreAt(root, { pid: 1001, alive: new Set([2002]) })
          const submitter = yield* fileStoreAt(root, { pid: 2002, alive: new Set([1001]) })
          const old = yield* submitter.submit({ clientRequestId: id("again"), payload: { n: 1 } })
          yield* submitter.cancel(old.task_id, old.payload_sha256)
          yield* Effect.sleep(Duration.millis(5))
          yield* collector.plan.arm(None)
          return { ...collector, submitter, old, record: `${root}/tasks/${old.task_id}.json` }
        })
        // Which removal is the record's, learned from a collection run through once.
        const counting = yield* setUp
        yield* counting.store.collect({ finishedBefore: Date.now() })
        const removals = (yield* counting.plan.journal).filter((entry) => entry.kind === "remove")
        const nth = removals.findIndex((entry) => entry.path === counting.record) + 1
        assert.isAbove(nth, 0)

        // The collection stops right before it removes the record, holding the task's lock.
        const { store, plan, submitter, old } = yield* setUp
        const collector = { store }
        const hold = yield* plan.holdAt("remove", nth)
        const collecting = yield* Effect.fork(collector.store.collect({ finishedBefore: Date.now() }))
        yield* Deferred.await(hold.reached)
        // The resubmit sees the record, and waits for the task's lock to read it.
        const resubmit = yield* Effect.fork(
          submitter.submit({ clientRequestId: id("again"), payload: { n: 1 } })
        )
        yield* Effect.sleep(Duration.millis(200))
        yield* Deferred.succeed(hold.release, undefined)
        const report = yield* Fiber.join(collecting)
        assert.deepStrictEqual(
          report.removed.map((task) => task.task_id),
          [old.task_id]
        )
        const fresh = yield* Fiber.join(resubmit)
        assert.strictEqual(fresh.task_id, old.task_id)
        assert.notStrictEqual(fresh.created_at, old.created_at)
        assert.strictEqual((yield* submitter.read(fresh.task_id, fresh.payload_sha256)).state, "queued")
        const states = yield* consistent(submitter)
        assert.deepStrictEqual([...states], [[fresh.task_id, "queued"]])
      })
    )
  )
})
