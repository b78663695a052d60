/**
 * The file store's lock-free submit (docs/file-store.md, "Submit, exactly"): the marker a submit
 * creates before its record is linked is never lost to a pass that meets it first, in either
 * order of the two; a leftover marker goes once its submitter is dead or too old; and the same
 * request submitted at once from many fibers and two processes makes one record and one marker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, TestClock } from "effect"
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import { SubmitInFlightMillis } from "../../src/store/file/FileTaskStore.js"
import { faultyFileStoreAt, fileStoreAt, tempDir } from "../support/stores.js"

const id = (text: string) => ClientRequestId.make(text)
const queuedMarkers = (root: string) => readdirSync(join(root, "index", "queued"))
const request = { workerId: "w", leaseMillis: 60_000, limit: 5 }

/** A submit on its own faulty FileSystem, held just before it links its record into place. */
const submitHeldAtLink = (root: string) =>
  Effect.gen(function* () {
    const { store, plan } = yield* faultyFileStoreAt(root)
    yield* plan.arm({ _tag: "None" })
    const hold = yield* plan.holdAt("link", 1)
    const submitting = yield* Effect.fork(store.submit({ clientRequestId: id("raced"), payload: { n: 1 } }))
    yield* Deferred.await(hold.reached)
    return { submitting, release: Deferred.succeed(hold.release, undefined) }
  })

describe("file store submit without a lock", () => {
  it.scoped("a pass that removes a submit's marker before the link: the submit creates it again", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const pass = yield* fileStoreAt(root)
      const { submitting, release } = yield* submitHeldAtLink(root)
      assert.strictEqual(queuedMarkers(root).length, 1, "the marker comes before the link")
      // The submit stalled past the in-flight bound: a pass takes its marker for a leftover.
      yield* TestClock.adjust(SubmitInFlightMillis + 1_000)
      assert.deepStrictEqual((yield* pass.live).queued, [])
      assert.deepStrictEqual(queuedMarkers(root), [])
      yield* release
      const receipt = yield* Fiber.join(submitting)
      assert.deepStrictEqual(
        queuedMarkers(root).map((name) => name.slice(16)),
        [receipt.task_id]
      )
      assert.deepStrictEqual((yield* pass.live).queued, [receipt.task_id])
      const claimed = yield* pass.claimNext(request)
      assert.deepStrictEqual(
        claimed.claimed.map((c) => c.record.task_id),
        [receipt.task_id]
      )
    })
  )

  it.scoped("a pass that removes a submit's marker after the link: the pass's second read restores it", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { submitting, release } = yield* submitHeldAtLink(root)
      const [marker] = queuedMarkers(root)
      const markerPath = join(root, "index", "queued", marker ?? assert.fail("no marker"))
      yield* TestClock.adjust(SubmitInFlightMillis + 1_000)
      // The pass found no record and is about to remove the marker (its lock's temp file went first).
      const repairer = yield* faultyFileStoreAt(root, { pid: 4343, alive: new Set([4242]) })
      yield* repairer.plan.arm({ _tag: "None" })
      const removal = yield* repairer.plan.holdAt("remove", 2)
      const passing = yield* Effect.fork(repairer.store.live)
      yield* Deferred.await(removal.reached)
      const journal = yield* repairer.plan.journal
      assert.deepStrictEqual(journal.at(-1), { kind: "remove", method: "remove", path: markerPath })
      // Now the submit links its record and finishes: its own second creation finds the marker there.
      yield* release
      const receipt = yield* Fiber.join(submitting)
      yield* Deferred.succeed(removal.release, undefined)
      const live = yield* Fiber.join(passing)
      assert.deepStrictEqual(live.queued, [receipt.task_id], "the pass read the record again and kept it")
      assert.deepStrictEqual(queuedMarkers(root), [marker])
    })
  )

  it.scoped(
    "a marker without a record is kept while its submitter is at work, and removed once it is not",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const store = yield* fileStoreAt(root, { pid: 4242, alive: new Set([5151]) })
        const queued = join(root, "index", "queued")
        const name = (n: number) => `00000000000000${n}-${String(n).repeat(64)}`
        writeFileSync(join(queued, name(1)), "5151\n") // a live submitter at work
        writeFileSync(join(queued, name(2)), "6161\n") // a dead one's leftover
        writeFileSync(join(queued, name(3)), "51") // torn: no pid to trust
        writeFileSync(join(queued, name(4)), "") // a marker no submit wrote
        const busy = yield* store.claimNext(request)
        assert.deepStrictEqual([busy.claimed, busy.busy], [[], 1])
        assert.deepStrictEqual((yield* store.live).queued, [])
        assert.deepStrictEqual(queuedMarkers(root), [name(1)])
        assert.strictEqual(readFileSync(join(queued, name(1)), "utf8"), "5151\n")
        // However alive, a submitter does not take this long between its marker and its link.
        yield* TestClock.adjust(SubmitInFlightMillis + 1_000)
        const later = yield* store.claimNext(request)
        assert.deepStrictEqual([later.claimed, later.busy], [[], 0])
        assert.deepStrictEqual(queuedMarkers(root), [])
      })
  )

  // Live: the racing resubmits wait for one another under the task lock, which sleeps between tries.
  it.scopedLive(
    "the same request from many fibers of two processes at once: one record, one marker, one receipt",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const alive = new Set([4242, 4343])
        const stores = [
          yield* fileStoreAt(root, { pid: 4242, alive }),
          yield* fileStoreAt(root, { pid: 4343, alive })
        ]
        const submits = Array.from({ length: 24 }, (_, n) =>
          (stores[n % 2] ?? assert.fail("no store")).submit({
            clientRequestId: id("same"),
            payload: { n: 1 }
          })
        )
        const receipts = yield* Effect.all(submits, { concurrency: "unbounded" })
        const taskId = receipts[0]?.task_id ?? assert.fail("no receipt")
        for (const receipt of receipts) assert.deepStrictEqual(receipt, receipts[0])
        assert.deepStrictEqual(
          readdirSync(join(root, "tasks")).filter((file) => file.endsWith(".json")),
          [`${taskId}.json`]
        )
        assert.deepStrictEqual(
          readdirSync(join(root, "tasks")).filter((file) => file.startsWith(".tmp-")),
          []
        )
        assert.deepStrictEqual(
          queuedMarkers(root).map((name) => name.slice(16)),
          [taskId]
        )
        const conflict = yield* Effect.either(
          (stores[1] ?? assert.fail("no store")).submit({ clientRequestId: id("same"), payload: { n: 2 } })
        )
        assert.isTrue(Either.isLeft(conflict) && conflict.left._tag === "ConflictError")
        assert.strictEqual(queuedMarkers(root).length, 1, "a conflicting submit leaves no marker")
      })
  )

  it.scoped("a resubmit answers only after an fsync of tasks/ that began once it saw the record", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const first = yield* (yield* fileStoreAt(root)).submit({ clientRequestId: id("retried"), payload: {} })
      // The submit that linked the record may still be waiting for its directory fsync: the
      // resubmit (another process, say) must not acknowledge the record before one has run.
      const { store, plan } = yield* faultyFileStoreAt(root, { pid: 4343 })
      yield* plan.arm({ _tag: "None" })
      const fsync = yield* plan.holdAt("sync", 1)
      const resubmitting = yield* Effect.fork(store.submit({ clientRequestId: id("retried"), payload: {} }))
      yield* Deferred.await(fsync.reached)
      assert.strictEqual((yield* plan.journal).at(-1)?.path, join(root, "tasks"))
      assert.isNull(resubmitting.unsafePoll(), "no answer before the fsync")
      yield* Deferred.succeed(fsync.release, undefined)
      assert.deepStrictEqual(yield* Fiber.join(resubmitting), first)
      const counts = yield* plan.counts
      // A look, the task's lock (its file and its release guard are the two links), one fsync.
      assert.deepStrictEqual([counts.sync, counts.link], [1, 2])
    })
  )

  it.scoped("a resubmit later on leaves no marker of its own, and restores a queued record's lost one", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const store = yield* fileStoreAt(root)
      const first = yield* store.submit({ clientRequestId: id("again"), payload: {} })
      const [marker] = queuedMarkers(root)
      writeFileSync(join(root, "index", "queued", marker ?? assert.fail("no marker")), "")
      yield* TestClock.adjust(5_000)
      assert.deepStrictEqual(yield* store.submit({ clientRequestId: id("again"), payload: {} }), first)
      assert.deepStrictEqual(queuedMarkers(root), [marker])
      // Its marker lost (a failure after the link), the record is found again by the next resubmit.
      rmSync(join(root, "index", "queued", marker ?? ""))
      yield* TestClock.adjust(5_000)
      assert.deepStrictEqual(yield* store.submit({ clientRequestId: id("again"), payload: {} }), first)
      assert.deepStrictEqual(queuedMarkers(root), [marker])
    })
  )
})
