/**
 * Random sequences of operations against every store, checked step by step against a small
 * pure model of the queue: what each call must answer, and what the queue must then hold.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Duration, Effect, Either, FastCheck as fc, Option, TestClock } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { Lease, Receipt, TaskState } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { fileStore, memoryStore } from "../support/stores.js"

type Op =
  | { readonly op: "submit"; readonly key: number; readonly payload: number }
  | {
      readonly op: "read" | "cancel" | "claim" | "complete" | "fail" | "staleComplete" | "tick"
      readonly key: number
    }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant("submit" as const), key: fc.nat(4), payload: fc.nat(1) }),
  fc.record({
    op: fc.constantFrom(
      "read" as const,
      "cancel" as const,
      "claim" as const,
      "complete" as const,
      "fail" as const,
      "staleComplete" as const,
      "tick" as const
    ),
    key: fc.nat(4)
  })
)

interface ModelTask {
  readonly payload: number
  state: TaskState
  attempt: number
  receipt: Receipt
  lease: Lease | undefined
  staleLease: Lease | undefined
}

const runAgainstModel = (store: TaskStoreShape, ops: ReadonlyArray<Op>) =>
  Effect.gen(function* () {
    const model = new Map<number, ModelTask>()
    for (const step of ops) {
      const task = model.get(step.key)
      switch (step.op) {
        case "tick":
          yield* TestClock.adjust(Duration.millis(1 + step.key))
          break
        case "submit": {
          const answer = yield* Effect.either(
            store.submit({
              clientRequestId: ClientRequestId.make(`k${step.key}`),
              payload: { p: step.payload }
            })
          )
          if (!task) {
            assert.isTrue(Either.isRight(answer), "first submit succeeds")
            if (Either.isRight(answer))
              model.set(step.key, {
                payload: step.payload,
                state: "queued",
                attempt: 0,
                receipt: answer.right,
                lease: undefined,
                staleLease: undefined
              })
          } else if (task.payload === step.payload) {
            assert.deepStrictEqual(answer, Either.right(task.receipt), "resubmit returns the same receipt")
          } else {
            assert.isTrue(Either.isLeft(answer) && answer.left._tag === "ConflictError", "conflict")
          }
          break
        }
        case "read": {
          if (!task) break
          const view = yield* store.read(task.receipt.task_id, task.receipt.payload_sha256)
          assert.strictEqual(view.state, task.state)
          assert.strictEqual(view.attempt, task.attempt)
          assert.strictEqual(view.attempts.length, task.attempt)
          break
        }
        case "cancel": {
          if (!task) break
          const outcome = yield* store.cancel(task.receipt.task_id, task.receipt.payload_sha256)
          if (task.state === "queued") task.state = "cancelled"
          assert.strictEqual(outcome.state, task.state)
          assert.strictEqual(outcome.cancelled, task.state === "cancelled")
          break
        }
        case "claim": {
          if (!task) break
          const claimed = yield* store.claim(task.receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
          assert.strictEqual(Option.isSome(claimed), task.state === "queued")
          if (Option.isSome(claimed)) {
            task.state = "running"
            task.attempt += 1
            task.staleLease = task.lease ?? { ...claimed.value.lease, owner_token: "someone-else" }
            task.lease = claimed.value.lease
            assert.strictEqual(claimed.value.lease.attempt, task.attempt)
          }
          break
        }
        case "complete":
        case "fail": {
          if (!task?.lease) break
          const outcome = yield* Effect.either(
            step.op === "complete"
              ? store.complete(task.receipt.task_id, task.lease, { done: step.key })
              : store.fail(task.receipt.task_id, task.lease, { tag: "Boom", message: "scripted" })
          )
          assert.strictEqual(Either.isRight(outcome), task.state === "running")
          if (Either.isLeft(outcome)) assert.strictEqual(outcome.left._tag, "StaleAttempt")
          if (task.state === "running") task.state = step.op === "complete" ? "complete" : "failed"
          break
        }
        case "staleComplete": {
          if (!task?.staleLease) break
          const outcome = yield* Effect.either(
            store.complete(task.receipt.task_id, task.staleLease, { stale: true })
          )
          assert.isTrue(
            Either.isLeft(outcome) && outcome.left._tag === "StaleAttempt",
            "a stale lease is fenced off"
          )
          break
        }
      }
      // After every step the live view agrees with the model.
      const live = yield* store.live
      const expectQueued = [...model.values()]
        .filter((t) => t.state === "queued")
        .map((t) => t.receipt.task_id)
      const expectRunning = [...model.values()]
        .filter((t) => t.state === "running")
        .map((t) => t.receipt.task_id)
      assert.sameMembers([...live.queued], expectQueued)
      assert.sameMembers(
        live.running.map((r) => r.task_id),
        expectRunning
      )
      assert.deepStrictEqual(live.invalid, [])
    }
    const report = yield* store.check
    assert.strictEqual(report.records, model.size)
    assert.deepStrictEqual(report.invalid_records, [])
  })

const stores: ReadonlyArray<readonly [string, () => Effect.Effect<TaskStoreShape, unknown, Scope.Scope>]> = [
  ["memory", () => memoryStore()],
  ["file", () => fileStore()]
]

describe("stores against the pure model", () => {
  for (const [name, make] of stores) {
    it.scoped.prop(
      `${name}: random operation sequences`,
      { ops: fc.array(opArb, { minLength: 1, maxLength: 40 }) },
      ({ ops }) => Effect.flatMap(make(), (store) => runAgainstModel(store, ops)),
      { fastCheck: { numRuns: name === "file" ? 25 : 100 } }
    )
  }
})
