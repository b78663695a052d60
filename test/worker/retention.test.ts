/** A watching worker's `--retention`: it collects at the start and on a timer, and says so. */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Either, Fiber, Layer, Option, Ref, Schema, TestClock } from "effect"
import { StorageError } from "../../src/domain/errors.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { WorkerEventLine } from "../../src/domain/workerEvent.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { WorkerOutput } from "../../src/services/WorkerOutput.js"
import { makeWorkerOutput } from "../../src/worker/events.js"
import { collectIntervalMillis, collectOnTimer } from "../../src/worker/retention.js"
import { memoryStore } from "../support/stores.js"

const Minute = 60_000
const decodeLine = Schema.decodeUnknownEither(Schema.parseJson(WorkerEventLine))

/** The worker's JSON event lines, captured and decoded strictly. */
const capture = Effect.gen(function* () {
  const lines = yield* Ref.make<ReadonlyArray<string>>([])
  const output = yield* makeWorkerOutput("json", (text) => Ref.update(lines, (all) => [...all, text]))
  const events = Effect.map(Ref.get(lines), (all) =>
    all.map((line) => {
      const decoded = decodeLine(line.trimEnd())
      if (Either.isLeft(decoded)) throw new Error(`not an event line: ${line}`)
      return decoded.right
    })
  )
  return { output, events }
})

const finish = (store: TaskStoreShape, name: string) =>
  Effect.gen(function* () {
    const receipt = yield* store.submit({ clientRequestId: ClientRequestId.make(name), payload: { name } })
    const claimed = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
    if (Option.isNone(claimed)) return yield* Effect.dieMessage("not claimed")
    yield* store.complete(receipt.task_id, claimed.value.lease, { name })
    return receipt
  })

describe("worker retention", () => {
  it("collects hourly, or every half of a shorter retention, at least a second apart", () => {
    assert.strictEqual(collectIntervalMillis(30 * 24 * 60 * Minute), 60 * Minute)
    assert.strictEqual(collectIntervalMillis(10 * Minute), 5 * Minute)
    assert.strictEqual(collectIntervalMillis(500), 1_000)
  })

  it.scoped("collects at the start and then on its timer; each collection is an event", () =>
    Effect.gen(function* () {
      const store = yield* memoryStore()
      const { output, events } = yield* capture
      const old = yield* finish(store, "old")
      yield* TestClock.adjust(Duration.minutes(6))
      const recent = yield* finish(store, "recent")
      const layer = Layer.merge(Layer.succeed(TaskStore, store), Layer.succeed(WorkerOutput, output))
      // A 10-minute retention collects every 5 minutes; at the start (6 minutes in) nothing is that old.
      const fiber = yield* Effect.fork(Effect.provide(collectOnTimer(10 * Minute), layer))
      yield* TestClock.adjust(Duration.minutes(0))
      yield* Effect.yieldNow()
      assert.strictEqual((yield* store.read(old.task_id, old.payload_sha256)).state, "complete")
      // 11 minutes in: the old task finished 11 minutes ago and goes; the recent one stays.
      yield* TestClock.adjust(Duration.minutes(5))
      const gone = yield* Effect.flip(store.read(old.task_id, old.payload_sha256))
      assert.strictEqual(gone._tag, "UnknownTask")
      assert.strictEqual((yield* store.read(recent.task_id, recent.payload_sha256)).state, "complete")
      yield* Fiber.interrupt(fiber)
      const collected = (yield* events).map((line) =>
        line.event === "collected"
          ? [line.time, line.finished_before, line.removed, line.damaged]
          : line.event
      )
      assert.deepStrictEqual(collected, [
        ["1970-01-01T00:06:00.000Z", "1969-12-31T23:56:00.000Z", 0, 0],
        ["1970-01-01T00:11:00.000Z", "1970-01-01T00:01:00.000Z", 1, 0]
      ])
    })
  )

  it.scoped("a collection that fails or dies is reported, and the next one still runs", () =>
    Effect.gen(function* () {
      const store = yield* memoryStore()
      const { output, events } = yield* capture
      const calls = yield* Ref.make(0)
      const failingOnce: TaskStoreShape = {
        ...store,
        collect: (request) =>
          Effect.flatMap(
            Ref.getAndUpdate(calls, (n) => n + 1),
            (n) =>
              n === 0
                ? Effect.fail(new StorageError({ operation: "remove", path: "tasks", reason: "disk gone" }))
                : n === 1
                  ? Effect.dieMessage("a defect in the store")
                  : store.collect(request)
          )
      }
      const layer = Layer.merge(Layer.succeed(TaskStore, failingOnce), Layer.succeed(WorkerOutput, output))
      const fiber = yield* Effect.fork(Effect.provide(collectOnTimer(2_000), layer))
      yield* TestClock.adjust(Duration.seconds(2))
      yield* Fiber.interrupt(fiber)
      // A typed failure, then a defect: both reported, and the timer goes on.
      assert.deepStrictEqual(
        (yield* events).map((line) => line.event),
        ["collect_failed", "collect_failed", "collected"]
      )
      const defect = (yield* events)[1]
      assert.isTrue(defect?.event === "collect_failed" && defect.message.includes("a defect in the store"))
      const failed = (yield* events)[0]
      assert.isTrue(failed?.event === "collect_failed" && failed.message.includes("disk gone"))
    })
  )
})
