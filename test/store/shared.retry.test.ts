/**
 * Store operations run again after their commit was cut off (PostgreSQL retries a transaction
 * whose outcome it could not learn): the second run meets the first one's write and must
 * answer as the first would have.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option, Ref } from "effect"
import { UnknownTask } from "../../src/domain/errors.js"
import { ClientRequestId, TaskId } from "../../src/domain/ids.js"
import type { TaskRecord } from "../../src/domain/Task.js"
import * as T from "../../src/domain/transitions.js"
import { Host } from "../../src/services/Host.js"
import type { ApplyStep } from "../../src/store/shared.js"
import { transitionOperations } from "../../src/store/shared.js"

const taskId = TaskId.make("b".repeat(64))
const queued: TaskRecord = T.newRecord({
  taskId,
  clientRequestId: ClientRequestId.make("r"),
  payload: {},
  payloadSha256: T.payloadSha256({}),
  now: 0
})

/**
 * An ApplyStep over one record that commits each write, then "loses" the answer and runs the
 * step again on what it wrote, returning the second answer: a retry after a cut-off commit.
 */
const committingTwice =
  (cell: Ref.Ref<TaskRecord>): ApplyStep<UnknownTask> =>
  <A, E>(
    id: TaskId,
    step: (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>
  ): Effect.Effect<A, E | UnknownTask> => {
    const run = Effect.flatMap(Ref.get(cell), (record) =>
      Either.match(step(record, 1_000), {
        onLeft: (error) => Effect.fail(error),
        onRight: ([written, answer]) =>
          Effect.as(written === undefined ? Effect.void : Ref.set(cell, written), answer)
      })
    )
    return id === taskId ? Effect.zipRight(run, run) : Effect.fail(new UnknownTask({ taskId: id }))
  }

describe("an operation run again after its commit was lost", () => {
  it.effect("a claim finds its own lease and still reports the task as claimed, once", () =>
    Effect.gen(function* () {
      const host = yield* Host
      const cell = yield* Ref.make(queued)
      const operations = transitionOperations(host, committingTwice(cell))
      const claimed = yield* operations.claim(taskId, { workerId: "w", leaseMillis: 60_000 })
      const stored = yield* Ref.get(cell)
      assert.isTrue(Option.isSome(claimed), "the claim that won must be reported as won")
      if (Option.isSome(claimed)) assert.deepStrictEqual(claimed.value.lease, stored.lease)
      // One attempt, not two: the second run wrote nothing.
      assert.strictEqual(stored.attempt, 1)
      assert.strictEqual(stored.attempts.length, 1)
    }).pipe(Effect.provide(Host.layerTest({})))
  )

  it.effect("another worker's claim of a running task is still refused", () =>
    Effect.gen(function* () {
      const host = yield* Host
      const cell = yield* Ref.make(queued)
      const operations = transitionOperations(host, committingTwice(cell))
      yield* operations.claim(taskId, { workerId: "first", leaseMillis: 60_000 })
      const second = yield* operations.claim(taskId, { workerId: "second", leaseMillis: 60_000 })
      assert.isTrue(Option.isNone(second))
      assert.strictEqual((yield* Ref.get(cell)).lease?.worker_id, "first")
    }).pipe(Effect.provide(Host.layerTest({})))
  )
})
