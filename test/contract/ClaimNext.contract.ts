/**
 * `claimNext`, the one way a worker finds work: every store must hand out ready tasks oldest
 * first, pass over what waits out a backoff or has no room, claim each task once with its own
 * attempt and lease, and answer `running` from the running tasks alone.
 *
 * Claims racing here are fibers of one process; test/chaos/claimNextRace.test.ts races eight
 * processes on 1,000 tasks on each store (eight fibers on the memory store, which lives in one).
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Duration, Effect, Option, TestClock } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import type { ClaimNextRequest, TaskStoreShape } from "../../src/services/TaskStore.js"

const id = (text: string) => ClientRequestId.make(text)
const worker = { workerId: "w1", leaseMillis: 60_000 }
const next = (limit: number, more: Partial<ClaimNextRequest> = {}): ClaimNextRequest => ({
  ...worker,
  limit,
  ...more
})
const idsOf = (batch: {
  readonly claimed: ReadonlyArray<{ readonly record: { readonly task_id: TaskId } }>
}) => batch.claimed.map((claimed) => claimed.record.task_id)

export const claimNextContract = (
  name: string,
  makeStore: () => Effect.Effect<TaskStoreShape, unknown, Scope.Scope>
) =>
  describe(`claimNext contract: ${name}`, () => {
    const withStore = <A, E>(body: (store: TaskStoreShape) => Effect.Effect<A, E, Scope.Scope>) =>
      Effect.flatMap(makeStore(), body)

    /** Submit tasks one millisecond apart, in the order given. */
    const submitAll = (
      store: TaskStoreShape,
      payloads: ReadonlyArray<Record<string, unknown>>,
      prefix = "t"
    ) =>
      Effect.forEach(payloads, (payload, index) =>
        Effect.zipLeft(
          Effect.map(store.submit({ clientRequestId: id(`${prefix}${index}`), payload }), (r) => r.task_id),
          TestClock.adjust(Duration.millis(1))
        )
      )

    it.scoped("claims oldest first, ties by task id, each with its own attempt and lease", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const first = yield* store.submit({ clientRequestId: id("first"), payload: {} })
          yield* TestClock.adjust(Duration.millis(1))
          const tiedA = yield* store.submit({ clientRequestId: id("tied-a"), payload: {} })
          const tiedB = yield* store.submit({ clientRequestId: id("tied-b"), payload: {} })
          yield* TestClock.adjust(Duration.millis(1))
          const last = yield* store.submit({ clientRequestId: id("last"), payload: {} })
          const batch = yield* store.claimNext(next(10))
          const tied = [tiedA.task_id, tiedB.task_id].sort()
          assert.deepStrictEqual(idsOf(batch), [first.task_id, ...tied, last.task_id])
          assert.deepStrictEqual(
            batch.claimed.map((c) => [c.record.state, c.lease.attempt, c.record.lease?.owner_token]),
            batch.claimed.map((c) => ["running", 1, c.lease.owner_token])
          )
          assert.strictEqual(new Set(batch.claimed.map((c) => c.lease.owner_token)).size, 4)
          assert.deepStrictEqual(batch.invalid, [])
          assert.strictEqual(batch.waiting, 0)
          assert.isNull(batch.next_due_at)
          // What it claimed is stored as claimed, and the lease it returned fences the outcome.
          const view = yield* store.read(first.task_id, first.payload_sha256)
          assert.strictEqual(view.state, "running")
          const claimedFirst = batch.claimed[0]
          if (claimedFirst === undefined) return assert.fail("nothing claimed")
          assert.strictEqual(
            yield* store.complete(first.task_id, claimedFirst.lease, { ok: true }),
            "complete"
          )
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(10))), [])
        })
      )
    )

    it.scoped("takes at most `limit`, continues where it left off, and zero takes nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const ids = yield* submitAll(store, [{}, {}, {}, {}, {}])
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(0))), [])
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(2))), ids.slice(0, 2))
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(2))), ids.slice(2, 4))
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(7))), ids.slice(4))
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(7))), [])
          const running = yield* store.running
          assert.deepStrictEqual(
            running.running.map((record) => record.task_id),
            ids
          )
        })
      )
    )

    it.scoped("passes over cancelled and claimed tasks, and finds a task submitted after a claim", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const ids = yield* submitAll(store, [{}, {}, {}])
          // The same request again: the receipt of the second task.
          const middle = yield* store.submit({ clientRequestId: id("t1"), payload: {} })
          yield* store.cancel(middle.task_id, middle.payload_sha256)
          const taken = yield* store.claim(ids[0] ?? middle.task_id, worker)
          assert.isTrue(Option.isSome(taken))
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(5))), [ids[2]])
          const late = yield* submitAll(store, [{}], "late")
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(5))), late)
        })
      )
    )

    it.scoped("passes over a task waiting out its backoff, says when it is due, and claims it then", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const retry = { max_attempts: 2, backoff_initial_ms: 4_000, backoff_max_ms: 4_000 }
          const [retried, fresh] = yield* submitAll(store, [{}, {}])
          if (retried === undefined || fresh === undefined) return assert.fail("not submitted")
          const first = yield* store.claimNext(next(1, { retry }))
          const lease = first.claimed[0]?.lease
          if (lease === undefined) return assert.fail("not claimed")
          const error = { tag: "ProviderTimeout", message: "slow", retryable: true }
          assert.strictEqual(yield* store.fail(retried, lease, error), "queued")
          const notBefore = (yield* store.record(retried)).not_before
          const batch = yield* store.claimNext(next(5, { retry }))
          assert.deepStrictEqual(idsOf(batch), [fresh])
          assert.strictEqual(batch.waiting, 1)
          assert.strictEqual(batch.next_due_at, notBefore ?? "no backoff")
          yield* TestClock.adjust(Duration.seconds(4))
          const due = yield* store.claimNext(next(5, { retry }))
          assert.deepStrictEqual(idsOf(due), [retried])
          assert.strictEqual(due.claimed[0]?.lease.attempt, 2)
          assert.strictEqual(due.waiting, 0)
          assert.isNull(due.next_due_at)
        })
      )
    )

    it.scoped("honours the room of capped providers; providers not named share the limit", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const [a1, b1, a2, c1, a3, c2] = yield* submitAll(store, [
            { provider: "a" },
            { provider: "b" },
            { provider: "a" },
            {},
            { provider: "a" },
            {}
          ])
          const room = new Map([
            ["a", 2],
            ["b", 0]
          ])
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(3, { room }))), [a1, a2, c1])
          assert.deepStrictEqual(
            idsOf(
              yield* store.claimNext(
                next(5, {
                  room: new Map([
                    ["a", 0],
                    ["b", 0]
                  ])
                })
              )
            ),
            [c2]
          )
          assert.deepStrictEqual(idsOf(yield* store.claimNext(next(5, { room: new Map([["a", 1]]) }))), [
            b1,
            a3
          ])
        })
      )
    )

    it.scoped("claims racing in one process hand out every task exactly once", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const ids = yield* submitAll(
            store,
            Array.from({ length: 24 }, () => ({}))
          )
          const batches = yield* Effect.all(
            Array.from({ length: 6 }, (_, index) =>
              Effect.map(store.claimNext(next(3, { workerId: `w${index}` })), idsOf)
            ),
            { concurrency: "unbounded" }
          )
          const again = idsOf(yield* store.claimNext(next(100)))
          const all = [...batches.flat(), ...again]
          assert.strictEqual(all.length, ids.length)
          assert.deepStrictEqual([...all].sort(), [...ids].sort())
        })
      )
    )

    it.scoped("running shows the running tasks alone, with their leases", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const [one, , three] = yield* submitAll(store, [{}, {}, {}])
          if (one === undefined || three === undefined) return assert.fail("not submitted")
          yield* store.claim(three, worker)
          yield* store.claim(one, worker)
          const snapshot = yield* store.running
          assert.deepStrictEqual(
            snapshot.running.map((record) => [record.task_id, record.lease?.worker_id]),
            [
              [one, "w1"],
              [three, "w1"]
            ]
          )
          assert.deepStrictEqual(snapshot.invalid, [])
        })
      )
    )
  })
