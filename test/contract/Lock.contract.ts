/**
 * The Lock contract: exclusion per key, independence of keys, LockTimeout after the wait, and
 * release however the body ends. Every Lock layer (memory, file) must pass it.
 * Time is live: a waiting taker really sleeps between tries.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Clock, Deferred, Effect, Either, Fiber, Ref } from "effect"
import type { LockShape } from "../support/locks.js"
import { hammerCounter } from "../support/locks.js"

/** Hold the lock for `key` in a background fiber for `millis`; returns once it is held. */
const holdFor = (lock: LockShape, key: string, millis: number) =>
  Effect.gen(function* () {
    const held = yield* Deferred.make<void>()
    const holder = yield* Effect.forkScoped(
      lock.withLock(key, Effect.zipRight(Deferred.succeed(held, undefined), Effect.sleep(millis)))
    )
    yield* Deferred.await(held)
    return holder
  })

const timed = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const result = yield* Effect.either(self)
    return { result, elapsed: (yield* Clock.currentTimeMillis) - started }
  })

export const lockContract = (name: string, makeLock: () => Effect.Effect<LockShape, unknown, Scope.Scope>) =>
  describe(`Lock contract: ${name}`, () => {
    it.scopedLive("20 fibers incrementing under one key: no increment lost, never two inside", () =>
      Effect.gen(function* () {
        const lock = yield* makeLock()
        const result = yield* hammerCounter(lock, { key: "counter", fibers: 20, iterations: 25 })
        assert.deepStrictEqual(result, { count: 500, maxInside: 1 })
      })
    )

    it.scopedLive("different keys do not block each other", () =>
      Effect.gen(function* () {
        const lock = yield* makeLock()
        yield* holdFor(lock, "a", 3_000)
        const other = yield* timed(lock.withLock("b", Effect.succeed("in b"), { waitMillis: 200 }))
        assert.deepStrictEqual(other.result, Either.right("in b"))
        const same = yield* timed(lock.withLock("a", Effect.void, { waitMillis: 200 }))
        assert.isTrue(Either.isLeft(same.result), "the held key itself is busy")
      })
    )

    it.scopedLive("a taker of a held lock fails with LockTimeout after its wait", () =>
      Effect.gen(function* () {
        const lock = yield* makeLock()
        yield* holdFor(lock, "busy", 2_000)
        const taker = yield* timed(lock.withLock("busy", Effect.succeed("entered"), { waitMillis: 200 }))
        const timedOutOn =
          Either.isLeft(taker.result) && taker.result.left._tag === "LockTimeout"
            ? taker.result.left.key
            : "-"
        assert.strictEqual(timedOutOn, "busy", `expected LockTimeout, got ${String(taker.result)}`)
        assert.isAtLeast(taker.elapsed, 190)
        assert.isBelow(taker.elapsed, 1_500, "the taker waited for the holder instead of timing out")
      })
    )

    it.scopedLive("a lock is free again once its holder leaves, even after a LockTimeout", () =>
      Effect.gen(function* () {
        const lock = yield* makeLock()
        const holder = yield* holdFor(lock, "busy", 300)
        const first = yield* Effect.either(lock.withLock("busy", Effect.void, { waitMillis: 50 }))
        assert.isTrue(Either.isLeft(first))
        yield* Fiber.join(holder)
        // Disconnected, so that a taker stuck in an uninterruptible wait still ends the test.
        const again = yield* Effect.disconnect(
          lock.withLock("busy", Effect.succeed("entered"), { waitMillis: 500 })
        ).pipe(
          Effect.timeoutTo({
            duration: "3 seconds",
            onSuccess: Either.right,
            onTimeout: () => Either.left("timed out")
          })
        )
        assert.deepStrictEqual(again, Either.right("entered"), "the timed-out taker left the lock held")
      })
    )

    it.scopedLive("a taker waiting for a held lock stops promptly when interrupted", () =>
      Effect.gen(function* () {
        const lock = yield* makeLock()
        const holder = yield* holdFor(lock, "busy", 2_000)
        const taker = yield* Effect.fork(lock.withLock("busy", Effect.void, { waitMillis: 10_000 }))
        yield* Effect.sleep("100 millis")
        const interrupting = yield* timed(Fiber.interrupt(taker))
        assert.isBelow(interrupting.elapsed, 1_000, "the interrupt waited for the lock")
        yield* Fiber.join(holder)
        const after = yield* Effect.either(
          lock.withLock("busy", Effect.succeed("entered"), { waitMillis: 500 })
        )
        assert.deepStrictEqual(after, Either.right("entered"))
      })
    )

    it.scopedLive(
      "a taker in an uninterruptible region waits out an interruption, runs its body, then ends",
      () =>
        Effect.gen(function* () {
          const lock = yield* makeLock()
          const held = yield* Deferred.make<void>()
          const holder = yield* Effect.fork(
            lock.withLock(
              "busy",
              Effect.zipRight(Deferred.succeed(held, undefined), Effect.sleep("400 millis"))
            )
          )
          yield* Deferred.await(held)
          const entered = yield* Ref.make(false)
          // What an attempt writing its outcome, or giving its task back at shutdown, does: its wait
          // for a lock someone else holds must not be cut short by the shutdown.
          const taker = yield* Effect.fork(
            Effect.uninterruptible(lock.withLock("busy", Ref.set(entered, true), { waitMillis: 10_000 }))
          )
          yield* Effect.sleep("100 millis")
          yield* Fiber.interrupt(taker)
          assert.isTrue(yield* Ref.get(entered), "the body ran once the holder let go")
          yield* Fiber.join(holder)
          const after = yield* Effect.either(
            lock.withLock("busy", Effect.succeed("entered"), { waitMillis: 500 })
          )
          assert.deepStrictEqual(after, Either.right("entered"), "and the lock was released")
        })
    )

    it.scopedLive("the lock is released when the body fails or is interrupted", () =>
      Effect.gen(function* () {
        const lock = yield* makeLock()
        const failed = yield* Effect.either(lock.withLock("k", Effect.fail("boom")))
        assert.deepStrictEqual(failed, Either.left("boom"))
        const stuck = yield* holdFor(lock, "k", 60_000)
        yield* Fiber.interrupt(stuck)
        const after = yield* Effect.either(lock.withLock("k", Effect.succeed("entered"), { waitMillis: 200 }))
        assert.deepStrictEqual(after, Either.right("entered"))
      })
    )
  })
