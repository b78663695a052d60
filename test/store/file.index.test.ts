/** The file store's own promises beyond the contract: layout, modes, the index and its repair. */
import { FileSystem } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Ref } from "effect"
import { readFileSync, statSync, readdirSync, renameSync, writeFileSync, rmSync } from "node:fs"
import { join } from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { buildService, fileStoreAt, tempDir } from "../support/stores.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { fileLockLayer } from "../../src/store/file/FileLock.js"
import { Lock } from "../../src/services/Lock.js"

const id = (text: string) => ClientRequestId.make(text)
const mode = (path: string) => statSync(path).mode & 0o777

/** A file store whose FileSystem counts reads of record files. */
const countingStore = (root: string) =>
  Effect.gen(function* () {
    const reads = yield* Ref.make(0)
    const counting = Layer.effect(
      FileSystem.FileSystem,
      Effect.map(FileSystem.FileSystem, (fs) => ({
        ...fs,
        readFile: (path: string) =>
          Effect.zipRight(
            path.endsWith(".json") ? Ref.update(reads, (n) => n + 1) : Effect.void,
            fs.readFile(path)
          )
      }))
    ).pipe(Layer.provide(nodeContextLayer))
    const store = yield* buildService(
      TaskStore,
      fileTaskStoreLayer({ root }).pipe(
        Layer.provide(Host.layerTest({})),
        Layer.provide(Layer.merge(nodeContextLayer, counting))
      )
    )
    return { store, reads }
  })

/**
 * The root's task locks as another writer of the same identity takes them: the store sees a
 * live holder (the same pid and host as its own test Host) and never breaks the lock.
 */
const writerLock = (root: string) =>
  buildService(
    Lock,
    fileLockLayer(join(root, "locks")).pipe(
      Layer.provide(Host.layerTest({})),
      Layer.provide(nodeContextLayer)
    )
  )

describe("file store layout", () => {
  it.scoped("creates the root 0700 and its files 0600, in the documented layout", () =>
    Effect.gen(function* () {
      const root = join(yield* tempDir, "data", "root")
      const store = yield* fileStoreAt(root)
      const receipt = yield* store.submit({ clientRequestId: id("m"), payload: {} })
      for (const dir of [root, join(root, "tasks"), join(root, "index", "queued"), join(root, "locks")])
        assert.strictEqual(mode(dir), 0o700, dir)
      assert.strictEqual(mode(join(root, "secret")), 0o600)
      assert.strictEqual(statSync(join(root, "secret")).size, 32)
      const record = join(root, "tasks", `${receipt.task_id}.json`)
      assert.strictEqual(mode(record), 0o600)
      assert.deepStrictEqual(readdirSync(join(root, "index", "queued")).length, 1)
      assert.deepStrictEqual(readdirSync(join(root, "locks")), [], "locks are released")
    })
  )

  it.scoped("the secret persists: the same request id maps to the same task in the same root only", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const first = yield* (yield* fileStoreAt(root)).submit({
        clientRequestId: id("same"),
        payload: { a: 1 }
      })
      const again = yield* (yield* fileStoreAt(root, { pid: 7 })).submit({
        clientRequestId: id("same"),
        payload: { a: 1 }
      })
      assert.deepStrictEqual(again, first)
      const elsewhere = yield* (yield* fileStoreAt(yield* tempDir)).submit({
        clientRequestId: id("same"),
        payload: { a: 1 }
      })
      assert.notStrictEqual(elsewhere.task_id, first.task_id)
    })
  )
})

describe("file store index", () => {
  it.scoped("live reads only live records, however many tasks have finished", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store, reads } = yield* countingStore(root)
      for (let i = 0; i < 60; i++) {
        const receipt = yield* store.submit({ clientRequestId: id(`done-${i}`), payload: { i } })
        yield* store.cancel(receipt.task_id, receipt.payload_sha256)
      }
      for (let i = 0; i < 3; i++) yield* store.submit({ clientRequestId: id(`live-${i}`), payload: { i } })
      yield* Ref.set(reads, 0)
      const live = yield* store.live
      assert.strictEqual(live.queued.length, 3)
      assert.strictEqual(yield* Ref.get(reads), 3)
    })
  )

  it.scoped(
    "a claim passes over a submit at work (its marker holds its live pid, no record yet), says so, and takes it once linked",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const store = yield* fileStoreAt(root)
        const receipt = yield* store.submit({ clientRequestId: id("in-flight"), payload: {} })
        // Back to the middle of that submit: its marker is there, holding the pid of a live
        // submitter (the store's own test Host), and its record is not linked yet.
        const record = join(root, "tasks", `${receipt.task_id}.json`)
        const aside = join(root, "aside.json")
        renameSync(record, aside)
        const [marker] = readdirSync(join(root, "index", "queued"))
        assert.strictEqual(readFileSync(join(root, "index", "queued", marker ?? ""), "utf8"), "4242\n")
        const request = { workerId: "w", leaseMillis: 60_000, limit: 1 }
        const during = yield* store.claimNext(request)
        assert.deepStrictEqual(during.claimed, [])
        assert.strictEqual(during.busy, 1, "reported, so that a worker asks again soon")
        assert.strictEqual(readdirSync(join(root, "index", "queued")).length, 1, "its marker is kept")
        // The submit finishes: the next claim, through the same cached listing, takes it.
        renameSync(aside, record)
        const after = yield* store.claimNext(request)
        assert.deepStrictEqual(
          after.claimed.map((claimed) => claimed.record.task_id),
          [receipt.task_id]
        )
        assert.strictEqual(after.busy, 0)
      })
  )

  it.scoped(
    "a queued task whose lock another writer holds is passed over as busy, not as nothing to do",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const store = yield* fileStoreAt(root)
        const receipt = yield* store.submit({ clientRequestId: id("held"), payload: {} })
        const lock = yield* writerLock(root)
        const request = { workerId: "w", leaseMillis: 60_000, limit: 1 }
        // Its record written, its lock not yet released: the end of a submit, or a requeue.
        const during = yield* Effect.scoped(
          Effect.zipRight(lock.acquire(receipt.task_id), store.claimNext(request))
        )
        assert.deepStrictEqual(during.claimed, [])
        assert.strictEqual(during.busy, 1)
        const after = yield* store.claimNext(request)
        assert.deepStrictEqual(
          after.claimed.map((claimed) => claimed.record.task_id),
          [receipt.task_id]
        )
      })
  )

  it.scoped("live repairs markers that disagree with their records", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const store = yield* fileStoreAt(root)
      const queued = join(root, "index", "queued")
      const running = join(root, "index", "running")
      // A finished task whose queued marker survived (a crash between the write and the removal).
      const done = yield* store.submit({ clientRequestId: id("done"), payload: {} })
      const doneMarker = readdirSync(queued)[0] ?? assert.fail("no marker")
      yield* store.cancel(done.task_id, done.payload_sha256)
      writeFileSync(join(queued, doneMarker), "")
      // A running task whose marker is still in queued (a crash between claim and the move).
      const moved = yield* store.submit({ clientRequestId: id("moved"), payload: {} })
      const claimed = yield* store.claim(moved.task_id, { workerId: "w", leaseMillis: 60_000 })
      assert.isTrue(Option.isSome(claimed))
      rmSync(join(running, moved.task_id))
      writeFileSync(join(queued, `000000000000001-${moved.task_id}`), "")
      // A marker with no record at all (a crash between marker and record on submit).
      const ghost = "a".repeat(64)
      writeFileSync(join(queued, `000000000000002-${ghost}`), "")

      const live = yield* store.live
      assert.deepStrictEqual(live.queued, [])
      assert.deepStrictEqual(
        live.running.map((r) => r.task_id),
        [moved.task_id]
      )
      assert.deepStrictEqual(readdirSync(queued), [])
      assert.deepStrictEqual(readdirSync(running), [moved.task_id])
    })
  )
})
