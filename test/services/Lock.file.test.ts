/**
 * File locks within one process: the Lock contract, what a holder leaves on disk, and the rule
 * that a release never removes a lock that is no longer its own.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Either, Exit, Fiber, Layer, Option, Scope } from "effect"
import { Host } from "../../src/services/Host.js"
import { Lock } from "../../src/services/Lock.js"
import { fileLockLayer } from "../../src/store/file/FileLock.js"
import { lockContract } from "../contract/Lock.contract.js"
import { fileLockAt, listNames, lockJson, readLock, token, writeText } from "../support/locks.js"
import { buildService, tempDir } from "../support/stores.js"

lockContract("file", () => Effect.flatMap(tempDir, (dir) => fileLockAt(dir)))

const here = { hostname: "here", bootId: "boot-now" }
/** Two processes on one host that each see the other alive. */
const hostA = { ...here, pid: 100, alive: new Set([200]) }
const hostB = { ...here, pid: 200, alive: new Set([100]) }

/** The real FileSystem, except that removing `file` first says so on `reached`, then waits for `gate`. */
const stallingRemoveOf = (file: string, reached: Deferred.Deferred<void>, gate: Deferred.Deferred<void>) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) =>
      FileSystem.FileSystem.of({
        ...fs,
        remove: (target, options) =>
          target === file
            ? Deferred.succeed(reached, undefined).pipe(
                Effect.zipRight(Deferred.await(gate)),
                Effect.zipRight(fs.remove(target, options))
              )
            : fs.remove(target, options)
      })
    )
  ).pipe(Layer.provide(NodeFileSystem.layer))

describe("file lock on disk", () => {
  it.scopedLive("a holder's lock file names it while held, and nothing is left after release", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = yield* Path.Path
      const lock = yield* fileLockAt(dir, hostA)
      const seen = yield* lock.withLock("task-1", readLock(path.join(dir, "task-1")))
      assert.isTrue(Option.isSome(seen))
      if (Option.isSome(seen)) {
        assert.strictEqual(seen.value.pid, 100)
        assert.strictEqual(seen.value.host, "here")
        assert.strictEqual(seen.value.boot_id, "boot-now")
        assert.match(seen.value.token, /^[0-9a-f]{32}$/)
      }
      assert.deepStrictEqual(yield* listNames(dir), [])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scopedLive("a key that is not a plain file name is refused", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const lock = yield* fileLockAt(dir, hostA)
      for (const key of ["../escape", "a/b", "", ".hidden"]) {
        const result = yield* Effect.either(lock.withLock(key, Effect.void))
        assert.isTrue(Either.isLeft(result) && result.left._tag === "StorageError", `key ${key}`)
      }
      assert.deepStrictEqual(yield* listNames(dir), [])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scopedLive("a release leaves alone a successor's lock written over the holder's", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = yield* Path.Path
      const file = path.join(dir, "task-1")
      const lock = yield* fileLockAt(dir, hostA)
      const successor = lockJson({
        token: token("b"),
        pid: 200,
        host: "here",
        bootId: "boot-now",
        expiresInMillis: 30_000,
        nowMillis: yield* Clock.currentTimeMillis
      })
      // A's lock was judged stale and replaced by B's while A still ran its section.
      yield* lock.withLock("task-1", writeText(file, successor))
      const after = yield* readLock(file)
      assert.isTrue(Option.isSome(after), "A's release removed B's lock")
      if (Option.isSome(after)) assert.strictEqual(after.value.token, token("b"))
      assert.deepStrictEqual(yield* listNames(dir), ["task-1"], "no guard or temp file is left")
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scopedLive("a holder past its time-to-live loses the lock, and its release keeps the successor's", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const path = yield* Path.Path
      const file = path.join(dir, "task-1")
      const lockA = yield* fileLockAt(dir, hostA, { ttlMillis: 150 })
      const lockB = yield* fileLockAt(dir, hostB)
      const scopeA = yield* Scope.make()
      yield* Scope.extend(lockA.acquire("task-1"), scopeA)
      const heldByA = yield* readLock(file)
      const scopeB = yield* Scope.make()
      yield* Scope.extend(lockB.acquire("task-1", { waitMillis: 3_000 }), scopeB)
      const heldByB = yield* readLock(file)
      assert.isTrue(Option.isSome(heldByA) && Option.isSome(heldByB))
      if (Option.isNone(heldByA) || Option.isNone(heldByB)) return
      assert.strictEqual(heldByB.value.pid, 200)
      assert.notStrictEqual(heldByB.value.token, heldByA.value.token)

      yield* Scope.close(scopeA, Exit.void)
      const afterA = yield* readLock(file)
      assert.deepStrictEqual(afterA, heldByB, "A's release removed B's lock")
      const third = yield* Effect.either(lockA.withLock("task-1", Effect.void, { waitMillis: 100 }))
      assert.isTrue(Either.isLeft(third), "B still holds the lock")

      yield* Scope.close(scopeB, Exit.void)
      assert.deepStrictEqual(yield* listNames(dir), [])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scopedLive(
    "a holder stalled inside its release, past its time-to-live, leaves its successor's lock",
    () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const path = yield* Path.Path
        const file = path.join(dir, "task-1")
        const reached = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        const stalling = fileLockLayer(dir, { ttlMillis: 300 }).pipe(
          Layer.provide(Host.layerTest(hostA)),
          Layer.provide(stallingRemoveOf(file, reached, gate)),
          Layer.provide(NodePath.layer)
        )
        const lockA = yield* buildService(Lock, stalling)
        const lockB = yield* fileLockAt(dir, hostB)
        const releasingA = yield* Effect.fork(lockA.withLock("task-1", Effect.void))
        yield* Deferred.await(reached)
        // A is about to unlink its lock, and stalls there (a GC pause, SIGSTOP, a slow disk).
        const bHolds = yield* Deferred.make<void>()
        const holderB = yield* Effect.forkScoped(
          lockB.withLock("task-1", Effect.zipRight(Deferred.succeed(bHolds, undefined), Effect.never), {
            waitMillis: 10_000
          })
        )
        // A's lock expires after 300 ms and B may break it. A sound release keeps B out until A's
        // unlink is done; either way, A's unlink goes ahead after this.
        yield* Deferred.await(bHolds).pipe(Effect.timeout("2 seconds"), Effect.ignore)
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(releasingA)
        yield* Deferred.await(bHolds).pipe(Effect.timeout("15 seconds"))

        const held = yield* readLock(file)
        assert.isTrue(Option.isSome(held) && held.value.pid === 200, "A's stalled release removed B's lock")
        const lockC = yield* fileLockAt(dir, hostA)
        const third = yield* Effect.either(lockC.withLock("task-1", Effect.void, { waitMillis: 200 }))
        assert.isTrue(Either.isLeft(third), "a third taker got in while B held the lock")
        yield* Fiber.interrupt(holderB)
        assert.deepStrictEqual(yield* listNames(dir), [])
      }).pipe(Effect.provide(nodeContextLayer))
  )
})
