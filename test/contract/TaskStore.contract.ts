/**
 * The TaskStore contract: every implementation (memory, file, PostgreSQL) must pass this suite.
 * Time is the TestClock's, so ordering and timestamps are exact.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Duration, Effect, Either, Option, TestClock } from "effect"
import { ClientRequestId, TaskId } from "../../src/domain/ids.js"
import type { RecordHead } from "../../src/domain/Task.js"
import { sha256Hex } from "../../src/domain/canonical.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { isoTime } from "../../src/domain/time.js"
import { presenceAt } from "../support/presence.js"

const id = (text: string) => ClientRequestId.make(text)
const at = <A>(items: ReadonlyArray<A>, index: number): A => {
  const item = items[index]
  if (item === undefined) throw new Error(`no item ${index}`)
  return item
}
const worker = { workerId: "w1", leaseMillis: 60_000 }

export const taskStoreContract = (
  name: string,
  makeStore: () => Effect.Effect<TaskStoreShape, unknown, Scope.Scope>
) =>
  describe(`TaskStore contract: ${name}`, () => {
    const withStore = <A, E>(body: (store: TaskStoreShape) => Effect.Effect<A, E, Scope.Scope>) =>
      Effect.flatMap(makeStore(), body)

    it.scoped("submit returns a receipt, and read shows the task queued", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("req-1"), payload: { message: "hello" } })
          assert.match(receipt.task_id, /^[0-9a-f]{64}$/)
          assert.strictEqual(receipt.payload_sha256, sha256Hex('{"message":"hello"}'))
          assert.strictEqual(receipt.created_at, "1970-01-01T00:00:00.000Z")
          const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(view.state, "queued")
          assert.strictEqual(view.result, null)
          assert.strictEqual(view.attempt, 0)
          assert.deepStrictEqual(view.attempts, [])
        })
      )
    )

    it.scoped("the task id is keyed: not the plain hash of the request id", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("req-1"), payload: {} })
          assert.notStrictEqual(receipt.task_id, sha256Hex("req-1"))
          const other = yield* store.submit({ clientRequestId: id("req-2"), payload: {} })
          assert.notStrictEqual(receipt.task_id, other.task_id)
        })
      )
    )

    it.scoped(
      "resubmitting the same id and payload returns the identical receipt, whatever the key order",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const first = yield* store.submit({
              clientRequestId: id("same"),
              payload: { a: 1, b: [1, { c: 2, d: 3 }] }
            })
            yield* TestClock.adjust(Duration.seconds(5))
            const again = yield* store.submit({
              clientRequestId: id("same"),
              payload: { b: [1, { d: 3, c: 2 }], a: 1 }
            })
            assert.strictEqual(JSON.stringify(again), JSON.stringify(first))
            const page = yield* store.list({})
            assert.strictEqual(page.tasks.length, 1)
          })
        )
    )

    it.scoped("the same id with another payload is a ConflictError and changes nothing", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const first = yield* store.submit({ clientRequestId: id("same"), payload: { v: 1 } })
          const before = yield* store.read(first.task_id, first.payload_sha256)
          const error = yield* Effect.flip(store.submit({ clientRequestId: id("same"), payload: { v: 2 } }))
          assert.strictEqual(error._tag, "ConflictError")
          if (error._tag === "ConflictError") assert.strictEqual(error.taskId, first.task_id)
          assert.deepStrictEqual(yield* store.read(first.task_id, first.payload_sha256), before)
        })
      )
    )

    it.scoped("the ttl a submit asks for is kept through every write; a resubmission's is ignored", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const kept = yield* store.submit({
            clientRequestId: id("ttl"),
            payload: { n: 1 },
            ttlMillis: 60_000
          })
          const unlimited = yield* store.submit({
            clientRequestId: id("ttl-null"),
            payload: {},
            ttlMillis: null
          })
          const plain = yield* store.submit({ clientRequestId: id("ttl-none"), payload: {} })
          const again = yield* store.submit({ clientRequestId: id("ttl"), payload: { n: 1 }, ttlMillis: 5 })
          assert.deepStrictEqual(again, kept)
          assert.strictEqual((yield* store.record(kept.task_id)).ttl_ms, 60_000)
          assert.isNull((yield* store.record(unlimited.task_id)).ttl_ms)
          assert.notProperty(yield* store.record(plain.task_id), "ttl_ms")
          // Claimed and completed: each write keeps it, and a head read without the payload has it.
          const claimed = yield* store.claim(kept.task_id, worker)
          if (Option.isNone(claimed)) return assert.fail("not claimed")
          yield* store.complete(kept.task_id, claimed.value.lease, { done: true })
          assert.strictEqual((yield* store.peek(kept.task_id)).ttl_ms, 60_000)
          // A ttl no record can keep is refused, naming the field, and nothing is stored.
          for (const ttlMillis of [-5, 1.5, Number.POSITIVE_INFINITY, Number.NaN]) {
            const refused = yield* Effect.flip(
              store.submit({ clientRequestId: id("ttl-bad"), payload: {}, ttlMillis })
            )
            assert.strictEqual(refused._tag, "InvalidInput")
            if (refused._tag === "InvalidInput") assert.strictEqual(refused.field, "ttl")
          }
          const after = yield* store.submit({ clientRequestId: id("ttl-bad"), payload: {} })
          assert.notProperty(
            yield* store.record(after.task_id),
            "ttl_ms",
            "the refused submits stored nothing"
          )
        })
      )
    )

    it.scoped("bad payloads are rejected naming the field, and nothing is stored", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const big = yield* Effect.flip(
            store.submit({ clientRequestId: id("big"), payload: { text: "x".repeat(1024 * 1024) } })
          )
          assert.strictEqual(big._tag, "InvalidInput")
          if (big._tag === "InvalidInput") {
            assert.strictEqual(big.field, "payload")
            assert.match(big.reason, /limit is 1048576 bytes/)
          }
          const notJson = yield* Effect.flip(
            store.submit({ clientRequestId: id("nan"), payload: { n: Number.NaN } })
          )
          assert.strictEqual(notJson._tag, "InvalidInput")
          assert.strictEqual((yield* store.list({})).tasks.length, 0)
        })
      )
    )

    it.scoped(
      "read of an unknown task is UnknownTask; a wrong hash is HashMismatch and reveals nothing",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const receipt = yield* store.submit({ clientRequestId: id("r"), payload: { secret: "s3" } })
            const unknown = yield* Effect.flip(store.read("0".repeat(64) as TaskId, receipt.payload_sha256))
            assert.strictEqual(unknown._tag, "UnknownTask")
            const mismatch = yield* Effect.flip(store.read(receipt.task_id, "f".repeat(64)))
            assert.strictEqual(mismatch._tag, "HashMismatch")
            assert.notInclude(JSON.stringify(mismatch), "s3")
            assert.notInclude(JSON.stringify(mismatch), "queued")
            const cancelMismatch = yield* Effect.flip(store.cancel(receipt.task_id, "f".repeat(64)))
            assert.strictEqual(cancelMismatch._tag, "HashMismatch")
            assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "queued")
          })
        )
    )

    it.scoped("cancel: queued becomes cancelled; again changes nothing; other states are reported", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const a = yield* store.submit({ clientRequestId: id("a"), payload: {} })
          assert.deepStrictEqual(yield* store.cancel(a.task_id, a.payload_sha256), {
            task_id: a.task_id,
            cancelled: true,
            cancel_requested: false,
            state: "cancelled"
          })
          const after = yield* store.read(a.task_id, a.payload_sha256)
          yield* TestClock.adjust(Duration.seconds(1))
          assert.deepStrictEqual(yield* store.cancel(a.task_id, a.payload_sha256), {
            task_id: a.task_id,
            cancelled: true,
            cancel_requested: false,
            state: "cancelled"
          })
          assert.deepStrictEqual(yield* store.read(a.task_id, a.payload_sha256), after)

          const b = yield* store.submit({ clientRequestId: id("b"), payload: {} })
          const claimed = yield* store.claim(b.task_id, worker)
          assert.isTrue(Option.isSome(claimed))
          assert.deepStrictEqual(yield* store.cancel(b.task_id, b.payload_sha256), {
            task_id: b.task_id,
            cancelled: false,
            cancel_requested: true,
            state: "running"
          })
          if (Option.isSome(claimed)) yield* store.complete(b.task_id, claimed.value.lease, { ok: true })
          assert.deepStrictEqual(yield* store.cancel(b.task_id, b.payload_sha256), {
            task_id: b.task_id,
            cancelled: false,
            cancel_requested: false,
            state: "complete"
          })
          // A cancelled task is never claimed.
          assert.isTrue(Option.isNone(yield* store.claim(a.task_id, worker)))
        })
      )
    )

    it.scoped("live lists queued tasks oldest first, ties broken by task id", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const first = yield* store.submit({ clientRequestId: id("first"), payload: {} })
          yield* TestClock.adjust(Duration.millis(1))
          const tiedA = yield* store.submit({ clientRequestId: id("tied-a"), payload: {} })
          const tiedB = yield* store.submit({ clientRequestId: id("tied-b"), payload: {} })
          yield* TestClock.adjust(Duration.millis(1))
          const last = yield* store.submit({ clientRequestId: id("last"), payload: {} })
          const tied = [tiedA.task_id, tiedB.task_id].sort()
          const snapshot = yield* store.live
          assert.deepStrictEqual(snapshot.queued, [first.task_id, ...tied, last.task_id])
          assert.deepStrictEqual(snapshot.running, [])
        })
      )
    )

    it.scoped("claim moves a queued task to running under a lease, once", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("c"), payload: { x: 1 } })
          yield* TestClock.adjust(Duration.seconds(2))
          const claimed = yield* store.claim(receipt.task_id, worker)
          assert.isTrue(Option.isSome(claimed))
          if (Option.isNone(claimed)) return
          const { lease, record } = claimed.value
          assert.strictEqual(lease.attempt, 1)
          assert.strictEqual(lease.worker_id, "w1")
          assert.strictEqual(lease.claimed_at, "1970-01-01T00:00:02.000Z")
          assert.strictEqual(lease.expires_at, "1970-01-01T00:01:02.000Z")
          assert.deepStrictEqual(record.payload, { x: 1 })
          assert.isTrue(Option.isNone(yield* store.claim(receipt.task_id, { ...worker, workerId: "w2" })))
          const snapshot = yield* store.live
          assert.deepStrictEqual(snapshot.queued, [])
          assert.deepStrictEqual(
            snapshot.running.map((r) => r.task_id),
            [receipt.task_id]
          )
          const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(view.state, "running")
          assert.strictEqual(view.started_at, "1970-01-01T00:00:02.000Z")
          assert.strictEqual(view.attempts[0]?.outcome, "running")
          const unknown = yield* Effect.flip(store.claim("1".repeat(64) as TaskId, worker))
          assert.strictEqual(unknown._tag, "UnknownTask")
        })
      )
    )

    it.scoped("heartbeat extends the lease; complete records the result; both are fenced", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("h"), payload: {} })
          const claimed = yield* store.claim(receipt.task_id, worker)
          if (Option.isNone(claimed)) return assert.fail("not claimed")
          const { lease } = claimed.value
          yield* TestClock.adjust(Duration.seconds(30))
          const extended = yield* store.heartbeat(receipt.task_id, lease, 60_000)
          assert.strictEqual(extended.lease.expires_at, "1970-01-01T00:01:30.000Z")
          assert.isFalse(extended.cancelRequested)
          const forged = { ...lease, owner_token: "not-the-owner" }
          const stale = yield* Effect.flip(store.heartbeat(receipt.task_id, forged, 60_000))
          assert.strictEqual(stale._tag, "StaleAttempt")
          const staleComplete = yield* Effect.flip(store.complete(receipt.task_id, forged, { forged: true }))
          assert.strictEqual(staleComplete._tag, "StaleAttempt")
          yield* store.complete(receipt.task_id, lease, { answer: 42 })
          const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(view.state, "complete")
          assert.deepStrictEqual(view.result, { answer: 42 })
          assert.strictEqual(view.finished_at, "1970-01-01T00:00:30.000Z")
          assert.deepStrictEqual(
            view.attempts.map((a) => [a.attempt, a.outcome, a.ended_at]),
            [[1, "complete", "1970-01-01T00:00:30.000Z"]]
          )
          // A finished task never goes back: a second outcome is refused.
          const again = yield* Effect.flip(store.fail(receipt.task_id, lease, { tag: "X", message: "late" }))
          assert.strictEqual(again._tag, "StaleAttempt")
          assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "complete")
          assert.deepStrictEqual((yield* store.live).running, [])
        })
      )
    )

    it.scoped("fail records the error on the task and its attempt", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("f"), payload: {} })
          const claimed = yield* store.claim(receipt.task_id, worker)
          if (Option.isNone(claimed)) return assert.fail("not claimed")
          yield* store.fail(receipt.task_id, claimed.value.lease, { tag: "ProviderFailed", message: "boom" })
          const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(view.state, "failed")
          assert.deepStrictEqual(view.error, { tag: "ProviderFailed", message: "boom" })
          assert.deepStrictEqual(view.attempts[0]?.error, { tag: "ProviderFailed", message: "boom" })
          assert.strictEqual(view.result, null)
        })
      )
    )

    it.scoped("a retryable failure queues the task again after its backoff; live shows when it is due", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("retry"), payload: { provider: "x" } })
          const retry = { max_attempts: 2, backoff_initial_ms: 4_000, backoff_max_ms: 4_000 }
          const first = yield* store.claim(receipt.task_id, { ...worker, retry })
          if (Option.isNone(first)) return assert.fail("not claimed")
          const error = { tag: "ProviderTimeout", message: "slow", retryable: true }
          assert.strictEqual(yield* store.fail(receipt.task_id, first.value.lease, error), "queued")
          const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(view.state, "queued")
          assert.strictEqual(view.max_attempts, 2)
          assert.isNotNull(view.not_before)
          const waiting = yield* store.live
          assert.deepStrictEqual(waiting.queued, [receipt.task_id])
          assert.deepStrictEqual(waiting.ready, [])
          assert.strictEqual(waiting.next_due_at, view.not_before)
          assert.isTrue(Option.isNone(yield* store.claim(receipt.task_id, { ...worker, retry })))
          yield* TestClock.adjust(Duration.seconds(4))
          const due = yield* store.live
          assert.deepStrictEqual(due.ready, [{ task_id: receipt.task_id, provider: "x" }])
          assert.isNull(due.next_due_at)
          const second = yield* store.claim(receipt.task_id, { ...worker, retry })
          if (Option.isNone(second)) return assert.fail("not claimed again")
          assert.strictEqual(second.value.lease.attempt, 2)
          assert.strictEqual(yield* store.fail(receipt.task_id, second.value.lease, error), "failed")
          const last = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(last.state, "failed")
          assert.deepStrictEqual(
            last.attempts.map((a) => [a.attempt, a.outcome, a.error?.tag]),
            [
              [1, "failed", "ProviderTimeout"],
              [2, "failed", "ProviderTimeout"]
            ]
          )
        })
      )
    )

    it.scoped("a claim can be declined by the worker's check of the record", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("decline"), payload: { provider: "p" } })
          const declined = yield* store.claim(receipt.task_id, { ...worker, accept: () => false })
          assert.isTrue(Option.isNone(declined))
          assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "queued")
          const seen: Array<unknown> = []
          const taken = yield* store.claim(receipt.task_id, {
            ...worker,
            accept: (record) => seen.push(record.payload["provider"]) > 0
          })
          assert.isTrue(Option.isSome(taken))
          assert.deepStrictEqual(seen, ["p"])
        })
      )
    )

    it.scoped(
      "cancel on a running task records the request; its worker learns it and ends it cancelled",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const receipt = yield* store.submit({ clientRequestId: id("cr"), payload: {} })
            const claimed = yield* store.claim(receipt.task_id, worker)
            if (Option.isNone(claimed)) return assert.fail("not claimed")
            const { lease } = claimed.value
            yield* TestClock.adjust(Duration.seconds(1))
            const asked = yield* store.cancel(receipt.task_id, receipt.payload_sha256)
            assert.deepStrictEqual(asked, {
              task_id: receipt.task_id,
              cancelled: false,
              cancel_requested: true,
              state: "running"
            })
            const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
            assert.strictEqual(view.cancel_requested_at, "1970-01-01T00:00:01.000Z")
            assert.isTrue((yield* store.heartbeat(receipt.task_id, lease, 60_000)).cancelRequested)
            assert.strictEqual(yield* store.stopCancelled(receipt.task_id, lease), "cancelled")
            const done = yield* store.read(receipt.task_id, receipt.payload_sha256)
            assert.strictEqual(done.state, "cancelled")
            assert.strictEqual(done.attempts[0]?.outcome, "cancelled")
            assert.deepStrictEqual((yield* store.live).running, [])
          })
        )
    )

    it.scoped("peek and running read a task as its record says, without needing its payload", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({
            clientRequestId: id("pk"),
            payload: { big: "x".repeat(1_000) }
          })
          const claimed = yield* store.claim(receipt.task_id, worker)
          if (Option.isNone(claimed)) return assert.fail("not claimed")
          const fields = (head: RecordHead) => ({ ...head, payload: undefined })
          const full = yield* store.record(receipt.task_id)
          // Every field of the record but the payload (a store that keeps payloads apart leaves it out).
          assert.deepStrictEqual(fields(yield* store.peek(receipt.task_id)), fields(full))
          const [running] = (yield* store.running).running
          assert.isDefined(running)
          if (running !== undefined) assert.deepStrictEqual(fields(running), fields(full))
          assert.isUndefined((yield* store.peek(receipt.task_id)).cancel_requested_at)
          yield* TestClock.adjust(Duration.seconds(1))
          yield* store.cancel(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(
            (yield* store.peek(receipt.task_id)).cancel_requested_at,
            "1970-01-01T00:00:01.000Z"
          )
          const unknown = yield* Effect.flip(store.peek(TaskId.make("2".repeat(64))))
          assert.strictEqual(unknown._tag, "UnknownTask")
        })
      )
    )

    it.scoped("reap and release are fenced; a reaped attempt's late result is kept, not taken", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const retry = { max_attempts: 3, backoff_initial_ms: 0, backoff_max_ms: 0 }
          const receipt = yield* store.submit({ clientRequestId: id("reap"), payload: {} })
          const a = yield* store.claim(receipt.task_id, { ...worker, leaseMillis: 1_000, retry })
          if (Option.isNone(a)) return assert.fail("not claimed")
          const early = yield* Effect.flip(store.reap(receipt.task_id, a.value.lease, "lease_expired"))
          assert.strictEqual(early._tag, "StaleAttempt", "a live lease is not reaped")
          yield* TestClock.adjust(Duration.seconds(2))
          assert.strictEqual(yield* store.reap(receipt.task_id, a.value.lease, "lease_expired"), "queued")
          const again = yield* Effect.flip(store.reap(receipt.task_id, a.value.lease, "lease_expired"))
          assert.strictEqual(again._tag, "StaleAttempt", "a reaped attempt is not reaped twice")

          const b = yield* store.claim(receipt.task_id, { ...worker, workerId: "w2", retry })
          if (Option.isNone(b)) return assert.fail("not claimed again")
          const late = yield* Effect.flip(store.complete(receipt.task_id, a.value.lease, "from A"))
          assert.strictEqual(late._tag, "StaleAttempt")
          const during = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(during.state, "running")
          assert.strictEqual(during.attempts[0]?.late?.result, "from A")
          assert.strictEqual(yield* store.release(receipt.task_id, b.value.lease), "queued")
          const released = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.deepStrictEqual(
            released.attempts.map((x) => [x.outcome, x.error?.tag]),
            [
              ["failed", "worker_lost"],
              ["failed", "shutdown"]
            ]
          )
          assert.isNull(released.not_before, "a release waits for no backoff")
          const c = yield* store.claim(receipt.task_id, { ...worker, retry })
          if (Option.isNone(c)) return assert.fail("not claimed a third time")
          assert.strictEqual(yield* store.complete(receipt.task_id, c.value.lease, "from C"), "complete")
          const done = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(done.result, "from C")
          assert.strictEqual(done.attempt, 3)
          const refused = yield* Effect.flip(store.release(receipt.task_id, c.value.lease))
          assert.strictEqual(refused._tag, "StaleAttempt", "a finished task is never given back")
        })
      )
    )

    it.scoped("list pages newest first, filters by state, and rejects a foreign cursor", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipts = []
          for (let i = 0; i < 5; i++) {
            receipts.push(yield* store.submit({ clientRequestId: id(`l${i}`), payload: { i } }))
            yield* TestClock.adjust(Duration.millis(10))
          }
          const claimed = yield* store.claim(at(receipts, 1).task_id, worker)
          assert.isTrue(Option.isSome(claimed))
          const first = yield* store.list({ limit: 2 })
          assert.deepStrictEqual(
            first.tasks.map((t) => t.task_id),
            [at(receipts, 4).task_id, at(receipts, 3).task_id]
          )
          assert.isNotNull(first.next_cursor)
          const second = yield* store.list({ limit: 2, cursor: first.next_cursor ?? undefined })
          assert.deepStrictEqual(
            second.tasks.map((t) => t.task_id),
            [at(receipts, 2).task_id, at(receipts, 1).task_id]
          )
          const third = yield* store.list({ limit: 2, cursor: second.next_cursor ?? undefined })
          assert.deepStrictEqual(
            third.tasks.map((t) => t.task_id),
            [at(receipts, 0).task_id]
          )
          assert.isNull(third.next_cursor)
          const running = yield* store.list({ state: "running" })
          assert.deepStrictEqual(
            running.tasks.map((t) => t.task_id),
            [at(receipts, 1).task_id]
          )
          assert.strictEqual((yield* store.list({ state: "queued" })).tasks.length, 4)
          assert.strictEqual((yield* store.list({ state: "complete" })).tasks.length, 0)
          const bad = yield* Effect.either(store.list({ cursor: "not-a-cursor" }))
          assert.isTrue(Either.isLeft(bad) && bad.left._tag === "InvalidInput")
        })
      )
    )

    it.scoped("a summary shows the provider a payload names, and when the task started and finished", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const named = yield* store.submit({ clientRequestId: id("named"), payload: { provider: "ollama" } })
          yield* store.submit({ clientRequestId: id("unnamed"), payload: { provider: 7 } })
          yield* TestClock.adjust(Duration.seconds(1))
          const claimed = yield* store.claim(named.task_id, worker)
          if (Option.isNone(claimed)) return assert.fail("not claimed")
          yield* TestClock.adjust(Duration.seconds(2))
          yield* store.complete(named.task_id, claimed.value.lease, "done")
          const { tasks } = yield* store.list({})
          const byId = new Map(tasks.map((t) => [t.client_request_id, t]))
          const done = byId.get(id("named"))
          assert.strictEqual(done?.provider, "ollama")
          assert.strictEqual(done?.started_at, "1970-01-01T00:00:01.000Z")
          assert.strictEqual(done?.finished_at, "1970-01-01T00:00:03.000Z")
          const queued = byId.get(id("unnamed"))
          assert.isNull(queued?.provider, "a provider that is not a string is none")
          assert.isNull(queued?.started_at)
          assert.isNull(queued?.finished_at)
        })
      )
    )

    it.scoped("list filters by provider and by search text before paging, so cursors continue", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipts = []
          for (let i = 0; i < 6; i++) {
            const provider = i % 2 === 0 ? { provider: "codex" } : {}
            receipts.push(
              yield* store.submit({
                clientRequestId: id(`Job-${i}-${i % 3 === 0 ? "Alpha" : "beta"}`),
                payload: provider
              })
            )
            yield* TestClock.adjust(Duration.millis(10))
          }
          // codex: 0, 2, 4; newest first, two a page.
          const first = yield* store.list({ provider: "codex", limit: 2 })
          assert.deepStrictEqual(
            first.tasks.map((t) => t.task_id),
            [at(receipts, 4).task_id, at(receipts, 2).task_id]
          )
          assert.isNotNull(first.next_cursor)
          const second = yield* store.list({
            provider: "codex",
            limit: 2,
            cursor: first.next_cursor ?? undefined
          })
          assert.deepStrictEqual(
            second.tasks.map((t) => t.task_id),
            [at(receipts, 0).task_id]
          )
          assert.isNull(second.next_cursor)
          assert.deepStrictEqual(
            (yield* store.list({ provider: "fake-echo" })).tasks.map((t) => t.task_id),
            [at(receipts, 5).task_id, at(receipts, 3).task_id, at(receipts, 1).task_id],
            "payloads that name no provider are the built-in fake-echo's, as the worker counts them"
          )
          // Case-insensitive substring of the request id: "ALPHA" matches 0 and 3.
          const alpha = yield* store.list({ search: "ALPHA", limit: 1 })
          assert.deepStrictEqual(
            alpha.tasks.map((t) => t.task_id),
            [at(receipts, 3).task_id]
          )
          const alphaNext = yield* store.list({
            search: "ALPHA",
            limit: 1,
            cursor: alpha.next_cursor ?? undefined
          })
          assert.deepStrictEqual(
            alphaNext.tasks.map((t) => t.task_id),
            [at(receipts, 0).task_id]
          )
          assert.isNull(alphaNext.next_cursor)
          // A piece of a task id finds that task; the filters combine.
          const target = at(receipts, 5).task_id
          const byTaskId = yield* store.list({ search: target.slice(10, 30).toUpperCase() })
          assert.deepStrictEqual(
            byTaskId.tasks.map((t) => t.task_id),
            [target]
          )
          const both = yield* store.list({ provider: "codex", search: "alpha", state: "queued" })
          assert.deepStrictEqual(
            both.tasks.map((t) => t.task_id),
            [at(receipts, 0).task_id]
          )
          assert.strictEqual((yield* store.list({ search: "" })).tasks.length, 6, "empty search is no filter")
        })
      )
    )

    it.scoped("record returns the whole stored record; an unknown task is UnknownTask", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id("rec"), payload: { prompt: "hi" } })
          const claimed = yield* store.claim(receipt.task_id, worker)
          if (Option.isNone(claimed)) return assert.fail("not claimed")
          yield* store.cancel(receipt.task_id, receipt.payload_sha256)
          const record = yield* store.record(receipt.task_id)
          assert.strictEqual(record.task_id, receipt.task_id)
          assert.strictEqual(record.client_request_id, "rec")
          assert.deepStrictEqual(record.payload, { prompt: "hi" })
          assert.strictEqual(record.state, "running")
          assert.strictEqual(record.lease?.owner_token, claimed.value.lease.owner_token)
          assert.strictEqual(record.cancel_requested_at, "1970-01-01T00:00:00.000Z")
          assert.strictEqual(record.attempts.length, 1)
          const unknown = yield* Effect.flip(store.record("2".repeat(64) as TaskId))
          assert.strictEqual(unknown._tag, "UnknownTask")
        })
      )
    )

    it.scoped("counts agree with check, state by state, as tasks move", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const agree = Effect.gen(function* () {
            const counts = yield* store.counts
            assert.deepStrictEqual(counts, (yield* store.check).states)
            return counts
          })
          assert.deepStrictEqual(yield* agree, {
            queued: 0,
            running: 0,
            complete: 0,
            failed: 0,
            cancelled: 0
          })
          const receipts = yield* Effect.forEach(["a", "b", "c", "d"], (name) =>
            store.submit({ clientRequestId: id(name), payload: {} })
          )
          const first = at(receipts, 0)
          const claimed = Option.getOrThrow(yield* store.claim(first.task_id, worker))
          yield* store.complete(first.task_id, claimed.lease, { ok: true })
          assert.isTrue(Option.isSome(yield* store.claim(at(receipts, 1).task_id, worker)))
          assert.deepStrictEqual(yield* agree, {
            queued: 2,
            running: 1,
            complete: 1,
            failed: 0,
            cancelled: 0
          })
        })
      )
    )

    it.scoped("check counts every record by state", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const a = yield* store.submit({ clientRequestId: id("a"), payload: {} })
          yield* store.submit({ clientRequestId: id("b"), payload: {} })
          yield* store.cancel(a.task_id, a.payload_sha256)
          const report = yield* store.check
          assert.strictEqual(report.records, 2)
          assert.deepStrictEqual(report.states, {
            queued: 1,
            running: 0,
            complete: 0,
            failed: 0,
            cancelled: 1
          })
          assert.deepStrictEqual(report.invalid_records, [])
        })
      )
    )

    it.scoped(
      "the worker registry: an announce adds or replaces the instance's entry; list orders by worker id",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            assert.deepStrictEqual(yield* store.workers.list, [], "empty before any worker")
            yield* store.workers.announce(presenceAt("b", "zeta", 1_000))
            yield* store.workers.announce(presenceAt("a", "alpha", 1_000))
            const renewed = presenceAt("b", "zeta", 6_000, { running: 2, status: "stopping" })
            yield* store.workers.announce(renewed)
            assert.deepStrictEqual(yield* store.workers.list, [presenceAt("a", "alpha", 1_000), renewed])
          })
        )
    )

    it.scoped("two runs under one worker id are two entries, and retiring one keeps the other", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const first = presenceAt("1", "same", 1_000, { started_at: isoTime(500) })
          const second = presenceAt("2", "same", 1_000, { started_at: isoTime(900), pid: 101 })
          yield* store.workers.announce(second)
          yield* store.workers.announce(first)
          assert.deepStrictEqual(
            yield* store.workers.list,
            [first, second],
            "same id: the earlier start first"
          )
          yield* store.workers.retire(first.instance)
          assert.deepStrictEqual(yield* store.workers.list, [second])
          // Retiring what is not there, or a name that is no instance, changes nothing.
          yield* store.workers.retire(first.instance)
          yield* store.workers.retire("../tasks")
          yield* store.workers.retire("")
          assert.deepStrictEqual(yield* store.workers.list, [second])
        })
      )
    )

    it.scoped("prune removes the entries that expired before the cutoff, and only those", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const gone = presenceAt("c", "gone", 0) // expires at 15 000
          const late = presenceAt("d", "late", 10_000) // expires at 25 000
          const alive = presenceAt("e", "alive", 90_000)
          yield* Effect.forEach([gone, late, alive], store.workers.announce, { discard: true })
          assert.strictEqual(yield* store.workers.prune(15_000), 0, "expiring at the cutoff is not before it")
          assert.strictEqual(yield* store.workers.prune(20_000), 1)
          assert.deepStrictEqual(yield* store.workers.list, [alive, late])
          assert.strictEqual(yield* store.workers.prune(20_000), 0, "nothing left to prune")
          // Tasks are untouched by any of this.
          assert.strictEqual((yield* store.check).records, 0)
        })
      )
    )
  })
