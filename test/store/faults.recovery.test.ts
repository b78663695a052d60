/**
 * What a file store does when it opens a root that a dead process or a dead machine left behind:
 * after a reboot, one reconciliation rebuilds the index from the records; after a process
 * crash, the temp files of dead writers are swept and nothing else is touched.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, Option } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import * as FaultyFileSystem from "../support/FaultyFileSystem.js"
import { FaultPlan } from "../support/FaultyFileSystem.js"
import { markers, tempFiles, untypedErrors } from "../support/restart.js"
import { fileStoreAt, fileStoreOn, tempDir } from "../support/stores.js"
import { writerMarkerName } from "../../src/store/file/layout.js"

const worker = { workerId: "w1", leaseMillis: 60_000 }
const files = Effect.all({ fs: FileSystem.FileSystem, path: Path.Path }).pipe(
  Effect.provide(nodeContextLayer)
)
const queuedName = (taskId: string) => `000000000000000-${taskId}`

/** One task in each of queued, running, complete and cancelled. */
const populate = (store: TaskStoreShape) =>
  Effect.gen(function* () {
    const submit = (id: string) =>
      store.submit({ clientRequestId: ClientRequestId.make(id), payload: { id } })
    const [queued, running, complete, cancelled] = yield* Effect.all([
      submit("q"),
      submit("r"),
      submit("c"),
      submit("x")
    ])
    const claim = yield* store.claim(running.task_id, worker)
    const done = yield* store.claim(complete.task_id, worker)
    if (Option.isNone(claim) || Option.isNone(done)) return yield* Effect.dieMessage("setup: claim failed")
    yield* store.complete(complete.task_id, done.value.lease, { ok: true })
    yield* store.cancel(cancelled.task_id, cancelled.payload_sha256)
    return { queued: queued.task_id, running: running.task_id, complete: complete.task_id }
  })

describe("file store recovery at open", () => {
  it.scoped("a reboot rebuilds the index from the records once; later opens leave repairs to a pass", () =>
    Effect.gen(function* () {
      const { fs, path } = yield* files
      const root = yield* tempDir
      const ids = yield* Effect.flatMap(fileStoreAt(root, { pid: 1001, bootId: "boot-a" }), populate)
      const dir = (name: string) => path.join(root, "index", name)
      // The machine died: markers written without fsync are lost, and junk is left in their place.
      for (const name of ["queued", "running"]) yield* fs.remove(dir(name), { recursive: true })
      for (const name of ["queued", "running"]) yield* fs.makeDirectory(dir(name))
      yield* fs.writeFile(path.join(dir("queued"), queuedName(ids.complete)), new Uint8Array())
      yield* fs.writeFile(path.join(dir("running"), ids.queued), new Uint8Array())
      yield* fs.writeFile(path.join(dir("running"), "f".repeat(64)), new Uint8Array())

      yield* fileStoreAt(root, { pid: 2001, bootId: "boot-b" })
      assert.deepStrictEqual(yield* markers(root), { queued: [ids.queued], running: [ids.running] })
      assert.strictEqual(yield* fs.readFileString(path.join(root, "boot")), "boot-b\n")

      // A bogus hint planted now survives the next open of the same boot: no second rebuild.
      const bogus = path.join(dir("queued"), queuedName(ids.complete))
      yield* fs.writeFile(bogus, new Uint8Array())
      const again = yield* fileStoreAt(root, { pid: 2002, bootId: "boot-b" })
      assert.isTrue(yield* fs.exists(bogus))
      const live = yield* again.live
      assert.deepStrictEqual(live.queued, [ids.queued])
      assert.deepStrictEqual(
        live.running.map((r) => r.task_id),
        [ids.running]
      )
      assert.isFalse(yield* fs.exists(bogus))
      assert.deepStrictEqual(yield* markers(root), { queued: [ids.queued], running: [ids.running] })
    })
  )

  it.scoped("a process opening a rebooted root while another reconciles it is not disturbed", () =>
    Effect.gen(function* () {
      const { path } = yield* files
      const root = yield* tempDir
      const ids = yield* Effect.scoped(
        Effect.flatMap(fileStoreAt(root, { pid: 1001, bootId: "boot-a" }), populate)
      )
      const boot = { bootId: "boot-b", alive: new Set([2001, 2002]) }
      const [first, second] = yield* Effect.all([
        Layer.build(FaultyFileSystem.layer),
        Layer.build(FaultyFileSystem.layer)
      ])
      // The second process has written its reconciliation lock file (a temp file) and is about
      // to link it into place when the first one takes that lock and reconciles.
      const hold = yield* Context.get(second, FaultPlan).holdAt("link", 1)
      const opening = yield* Effect.fork(
        Effect.exit(fileStoreOn(root, { ...boot, pid: 2002 }, Layer.succeedContext(second)))
      )
      yield* Deferred.await(hold.reached)
      yield* fileStoreOn(root, { ...boot, pid: 2001 }, Layer.succeedContext(first))
      yield* Deferred.succeed(hold.release, undefined)
      assert.deepStrictEqual(untypedErrors(yield* Fiber.join(opening), []), [])

      const bootWrites = (shared: Context.Context<FaultPlan>) =>
        Effect.map(
          Context.get(shared, FaultPlan).journal,
          (journal) =>
            journal.filter((e) => e.method === "rename" && e.path === path.join(root, "boot")).length
        )
      assert.deepStrictEqual([yield* bootWrites(first), yield* bootWrites(second)], [1, 0])
      assert.deepStrictEqual(yield* markers(root), { queued: [ids.queued], running: [ids.running] })
    })
  )

  it.scoped(
    "temp files of dead writers are swept at open (in tasks/ when a dead writer left its marker), after a reboot too; a live writer's are kept",
    () =>
      Effect.gen(function* () {
        const { fs, path } = yield* files
        const root = yield* tempDir
        yield* fileStoreAt(root, { pid: 1001, bootId: "boot-a" })
        for (const dir of ["tasks", "locks"]) {
          yield* fs.writeFileString(path.join(root, dir, ".tmp-1001-0123abcd"), "{ half a rec")
          yield* fs.writeFileString(path.join(root, dir, ".tmp-1003-4567cdef"), "{ being writ")
        }
        // Without a writer marker of a dead instance, an open does not list tasks/ (it can hold a
        // file for each of 100,000 tasks): the small directories are swept, tasks/ is left.
        yield* fileStoreAt(root, { pid: 1002, bootId: "boot-a", alive: new Set([1003]) })
        assert.deepStrictEqual(yield* tempFiles(root, "tasks"), [".tmp-1001-0123abcd", ".tmp-1003-4567cdef"])
        assert.deepStrictEqual(yield* tempFiles(root, "locks"), [".tmp-1003-4567cdef"])

        // The marker pid 1001 created before its first temp file there, and left when it died.
        const dead = path.join(root, "writers", writerMarkerName("boot-a", 1001, "ab".repeat(16)))
        const live = path.join(root, "writers", writerMarkerName("boot-a", 1003, "cd".repeat(16)))
        for (const marker of [dead, live]) yield* fs.writeFileString(marker, "")
        yield* fileStoreAt(root, { pid: 1002, bootId: "boot-a", alive: new Set([1003]) })
        assert.deepStrictEqual(yield* tempFiles(root, "tasks"), [".tmp-1003-4567cdef"])
        assert.deepStrictEqual(
          [yield* fs.exists(dead), yield* fs.exists(live)],
          [false, true],
          "the dead writer's marker goes with its temp files; a live one's stays"
        )

        // After a reboot, a temp file of a live pid may be a writer of this boot (another process
        // opening the root this very moment): keep it. A dead pid's file goes, as before.
        yield* fs.writeFileString(path.join(root, "tasks", ".tmp-1001-89abcdef"), "{ half a rec")
        yield* fileStoreAt(root, { pid: 1002, bootId: "boot-b", alive: new Set([1003]) })
        assert.deepStrictEqual(yield* tempFiles(root, "tasks"), [".tmp-1003-4567cdef"])
        assert.deepStrictEqual(yield* tempFiles(root, "locks"), [".tmp-1003-4567cdef"])
      })
  )
})
