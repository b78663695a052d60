/** `makeSharedSync`: concurrent callers share directory fsyncs, and each waits for one that began after it asked. */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Ref } from "effect"
import { StorageError } from "../../src/domain/errors.js"
import { makeSharedSync } from "../../src/platform/durable.js"

/** An fsync the test lets finish one at a time, counting how many began. */
const gatedSync = Effect.gen(function* () {
  const begun = yield* Ref.make<ReadonlyArray<Deferred.Deferred<void, StorageError>>>([])
  const sync = Effect.flatMap(Deferred.make<void, StorageError>(), (gate) =>
    Effect.zipRight(
      Ref.update(begun, (all) => [...all, gate]),
      Deferred.await(gate)
    )
  )
  const nth = (n: number) =>
    Effect.flatMap(Ref.get(begun), (all) => {
      const gate = all[n - 1]
      return gate === undefined ? Effect.dieMessage(`fsync #${n} never began`) : Effect.succeed(gate)
    })
  /** Wait until `n` fsyncs have begun. */
  const begunCount = Effect.map(Ref.get(begun), (all) => all.length)
  const awaitBegun = (n: number) =>
    Effect.repeat(begunCount, { until: (count) => count >= n }).pipe(Effect.zipRight(Effect.yieldNow()))
  return { shared: yield* makeSharedSync(sync), nth, begunCount, awaitBegun }
})

const failure = new StorageError({ operation: "fsync", path: "/root/tasks", reason: "EIO" })

describe("makeSharedSync", () => {
  it.effect("callers that ask while an fsync runs share the next one, which begins after they asked", () =>
    Effect.gen(function* () {
      const { shared, nth, begunCount, awaitBegun } = yield* gatedSync
      const first = yield* Effect.fork(shared)
      yield* awaitBegun(1)
      // Asked while fsync #1 runs: it may have begun before their writes, so they wait for #2.
      const later = yield* Effect.forEach([1, 2, 3, 4], () => Effect.fork(shared))
      yield* Effect.yieldNow()
      assert.strictEqual(yield* begunCount, 1, "no second fsync while the first runs")
      yield* Deferred.succeed(yield* nth(1), undefined)
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(first)))
      yield* awaitBegun(2)
      for (const fiber of later) assert.isNull(fiber.unsafePoll(), "still waiting for fsync #2")
      yield* Deferred.succeed(yield* nth(2), undefined)
      for (const fiber of later) assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      assert.strictEqual(yield* begunCount, 2, "five callers, two fsyncs")
    })
  )

  it.effect("a failed fsync fails every caller that shared it, and the next caller gets a fresh one", () =>
    Effect.gen(function* () {
      const { shared, nth, begunCount, awaitBegun } = yield* gatedSync
      const first = yield* Effect.fork(shared)
      yield* awaitBegun(1)
      const sharing = yield* Effect.forEach([1, 2], () => Effect.fork(shared))
      yield* Deferred.succeed(yield* nth(1), undefined)
      yield* awaitBegun(2)
      yield* Deferred.fail(yield* nth(2), failure)
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(first)))
      for (const fiber of sharing) assert.deepStrictEqual(yield* Fiber.await(fiber), Exit.fail(failure))
      const after = yield* Effect.fork(shared)
      yield* awaitBegun(3)
      yield* Deferred.succeed(yield* nth(3), undefined)
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(after)))
      assert.strictEqual(yield* begunCount, 3)
    })
  )

  it.effect(
    "a first caller interrupted during its own fsync hands the callers that came meanwhile a fresh one",
    () =>
      Effect.gen(function* () {
        const { shared, nth, begunCount, awaitBegun } = yield* gatedSync
        const leaver = yield* Effect.fork(shared)
        yield* awaitBegun(1)
        const stayer = yield* Effect.fork(shared)
        yield* Fiber.interrupt(leaver)
        yield* Deferred.succeed(yield* nth(1), undefined)
        yield* awaitBegun(2)
        yield* Deferred.succeed(yield* nth(2), undefined)
        assert.isTrue(Exit.isSuccess(yield* Fiber.await(stayer)))
        assert.strictEqual(yield* begunCount, 2)
      })
  )
})
