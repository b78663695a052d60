/**
 * The state machine's reliability rules, as pure functions: retries and their backoff, cancel
 * requests, reaping and releasing under the fence, and late outcomes of stale attempts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { ClientRequestId, TaskId } from "../../src/domain/ids.js"
import type { Lease, RetryPolicy, TaskError, TaskRecord } from "../../src/domain/Task.js"
import { isoTime } from "../../src/domain/Task.js"
import * as T from "../../src/domain/transitions.js"

const policy = (max: number, initial = 1_000, cap = 60_000): RetryPolicy => ({
  max_attempts: max,
  backoff_initial_ms: initial,
  backoff_max_ms: cap
})
const claimant = (token: string): T.Claimant => ({
  worker_id: `w-${token}`,
  pid: 10,
  host: "here",
  boot_id: "boot",
  owner_token: token
})
const retryable: TaskError = { tag: "ProviderTimeout", message: "slow", retryable: true }
const fatal: TaskError = { tag: "InvalidPayload", message: "bad", retryable: false }

const queued = (): TaskRecord =>
  T.newRecord({
    taskId: TaskId.make("a".repeat(64)),
    clientRequestId: ClientRequestId.make("r"),
    payload: {},
    payloadSha256: T.payloadSha256({}),
    now: 0
  })

/** Claim `record` at `now`; fails the test when the claim is refused. */
const claimed = (record: TaskRecord, now: number, retry: RetryPolicy, token = "t1") => {
  const next = T.claim(record, claimant(token), now, 10_000, retry)
  if (next?.lease === undefined || next.lease === null) throw new Error("not claimed")
  return { record: next, lease: next.lease }
}
const right = <A, E>(either: Either.Either<A, E>): A => {
  if (Either.isLeft(either)) throw new Error(`expected Right, got ${String(either.left)}`)
  return either.right
}
const staleReason = <A>(either: Either.Either<A, { readonly _tag: string; readonly reason: string }>) => {
  if (Either.isRight(either)) throw new Error("expected StaleAttempt")
  assert.strictEqual(either.left._tag, "StaleAttempt")
  return either.left.reason
}

describe("backoff", () => {
  it("doubles from the initial delay, is capped, and jitters within [nominal/2, nominal]", () => {
    const p = policy(10, 1_000, 5_000)
    assert.strictEqual(T.backoffMillis(p, 1, 0), 500)
    assert.strictEqual(T.backoffMillis(p, 1, 0.999999), 1_000)
    assert.strictEqual(T.backoffMillis(p, 2, 0), 1_000)
    assert.strictEqual(T.backoffMillis(p, 3, 1), 4_000)
    assert.strictEqual(T.backoffMillis(p, 4, 1), 5_000)
    assert.strictEqual(T.backoffMillis(p, 40, 0.5), 3_750)
    for (let attempt = 1; attempt <= 12; attempt++) {
      const nominal = Math.min(5_000, 1_000 * 2 ** (attempt - 1))
      for (const jitter of [0, 0.1, 0.5, 0.9, 0.999]) {
        const wait = T.backoffMillis(p, attempt, jitter)
        assert.isAtLeast(wait, nominal / 2)
        assert.isAtMost(wait, nominal)
      }
    }
  })
})

describe("retries", () => {
  it("a retryable failure with attempts left goes back to the queue, waiting out its backoff", () => {
    const first = claimed(queued(), 100, policy(3))
    const next = right(
      T.finish(first.record, first.lease, { _tag: "failed", error: retryable }, { now: 200, jitter: 0 })
    )
    assert.strictEqual(next.state, "queued")
    assert.strictEqual(next.lease, null)
    assert.strictEqual(next.not_before, isoTime(200 + 500))
    assert.strictEqual(next.attempts[0]?.outcome, "failed")
    assert.deepStrictEqual(next.attempts[0]?.error, retryable)
    assert.isFalse(T.isDue(next, 699))
    assert.strictEqual(T.claim(next, claimant("t2"), 699, 10_000, policy(3)), undefined)
    const second = claimed(next, 700, policy(3), "t2")
    assert.strictEqual(second.record.attempt, 2)
    assert.strictEqual(second.record.not_before, undefined)
    assert.strictEqual(second.record.attempts.length, 2)
  })

  it("at the limit, or with an error that is not retryable, the task fails and keeps every error", () => {
    let record = queued()
    for (let attempt = 1; attempt <= 2; attempt++) {
      const current = claimed(record, attempt * 100_000, policy(2), `t${attempt}`)
      record = right(
        T.finish(
          current.record,
          current.lease,
          { _tag: "failed", error: retryable },
          { now: attempt * 100_000 + 1, jitter: 0 }
        )
      )
    }
    assert.strictEqual(record.state, "failed")
    assert.strictEqual(record.attempt, 2)
    assert.deepStrictEqual(
      record.attempts.map((a) => [a.outcome, a.error?.tag]),
      [
        ["failed", "ProviderTimeout"],
        ["failed", "ProviderTimeout"]
      ]
    )
    assert.strictEqual(record.not_before, undefined)

    const once = claimed(queued(), 0, policy(5))
    const failed = right(
      T.finish(once.record, once.lease, { _tag: "failed", error: fatal }, { now: 1, jitter: 0 })
    )
    assert.strictEqual(failed.state, "failed")
    assert.deepStrictEqual(failed.error, fatal)
  })

  it("an error without a retryable flag (records from before retries) is not retried", () => {
    const current = claimed(queued(), 0, policy(5))
    const next = right(
      T.finish(
        current.record,
        current.lease,
        { _tag: "failed", error: { tag: "X", message: "m" } },
        { now: 1, jitter: 0 }
      )
    )
    assert.strictEqual(next.state, "failed")
  })

  it("a completed task never goes back: a late failure or reap of its attempt is refused", () => {
    const current = claimed(queued(), 0, policy(5))
    const done = right(
      T.finish(current.record, current.lease, { _tag: "complete", result: 1 }, { now: 5, jitter: 0 })
    )
    assert.strictEqual(done.state, "complete")
    staleReason(T.finish(done, current.lease, { _tag: "failed", error: retryable }, { now: 6, jitter: 0 }))
    staleReason(T.reap(done, current.lease, "owner_dead", { now: 6, jitter: 0 }))
    staleReason(T.release(done, current.lease, { now: 6, jitter: 0 }))
    assert.strictEqual(T.claim(done, claimant("t9"), 7, 10_000, policy(5)), undefined)
  })
})

describe("cancel", () => {
  it("on a running task records the request once and keeps it running; its worker's stop ends it cancelled", () => {
    const current = claimed(queued(), 0, policy(3))
    const asked = T.cancel(current.record, 50)
    assert.deepStrictEqual(asked.outcome, {
      task_id: current.record.task_id,
      cancelled: false,
      cancel_requested: true,
      state: "running"
    })
    const requested = asked.next
    if (requested === undefined) return assert.fail("the request was not recorded")
    assert.strictEqual(requested.cancel_requested_at, isoTime(50))
    assert.strictEqual(requested.state, "running")
    const again = T.cancel(requested, 60)
    assert.strictEqual(again.next, undefined, "a second request writes nothing")
    assert.isTrue(again.outcome.cancel_requested)

    const stopped = right(T.finish(requested, current.lease, { _tag: "cancelled" }, { now: 70, jitter: 0 }))
    assert.strictEqual(stopped.state, "cancelled")
    assert.strictEqual(stopped.attempts[0]?.outcome, "cancelled")
    assert.strictEqual(stopped.finished_at, isoTime(70))
    assert.deepStrictEqual(T.cancel(stopped, 80).outcome, {
      task_id: stopped.task_id,
      cancelled: true,
      cancel_requested: false,
      state: "cancelled"
    })
  })

  it("a requested cancel wins over a retry, but not over a result that arrived", () => {
    const current = claimed(queued(), 0, policy(3))
    const requested = T.cancel(current.record, 1).next
    if (requested === undefined) return assert.fail("not recorded")
    const failed = right(
      T.finish(requested, current.lease, { _tag: "failed", error: retryable }, { now: 2, jitter: 0 })
    )
    assert.strictEqual(failed.state, "cancelled")
    assert.deepStrictEqual(failed.attempts[0]?.error, retryable)
    const reaped = right(T.reap(requested, current.lease, "owner_dead", { now: 2, jitter: 0 }))
    assert.strictEqual(reaped.state, "cancelled")
    const done = right(
      T.finish(requested, current.lease, { _tag: "complete", result: "r" }, { now: 2, jitter: 0 })
    )
    assert.strictEqual(done.state, "complete")
    assert.strictEqual(done.result, "r")
  })

  it("a finished task is reported unchanged", () => {
    const current = claimed(queued(), 0, policy(1))
    const done = right(
      T.finish(current.record, current.lease, { _tag: "complete", result: 1 }, { now: 1, jitter: 0 })
    )
    const outcome = T.cancel(done, 2)
    assert.strictEqual(outcome.next, undefined)
    assert.deepStrictEqual(outcome.outcome, {
      task_id: done.task_id,
      cancelled: false,
      cancel_requested: false,
      state: "complete"
    })
  })
})

describe("reaping and releasing", () => {
  it("reaps an orphan as worker_lost: queued again while attempts remain, else failed", () => {
    const current = claimed(queued(), 0, policy(2))
    const again = right(T.reap(current.record, current.lease, "lease_expired", { now: 20_000, jitter: 0 }))
    assert.strictEqual(again.state, "queued")
    assert.strictEqual(again.attempts[0]?.error?.tag, "worker_lost")
    assert.isTrue(again.attempts[0]?.error?.retryable)
    assert.match(again.attempts[0]?.error?.message ?? "", /w-t1 \(pid 10 on here\).*lease expired/)
    assert.strictEqual(again.not_before, isoTime(20_000 + 500))
    const second = claimed(again, 30_000, policy(2), "t2")
    const failed = right(T.reap(second.record, second.lease, "owner_dead", { now: 30_001, jitter: 0 }))
    assert.strictEqual(failed.state, "failed")
    assert.strictEqual(failed.error?.tag, "worker_lost")
  })

  it("does not reap a lease that was renewed since it was seen expired, nor another attempt's", () => {
    const current = claimed(queued(), 0, policy(2))
    const renewed = right(T.heartbeat(current.record, current.lease, 9_000, 10_000))
    assert.strictEqual(
      staleReason(T.reap(renewed, current.lease, "lease_expired", { now: 11_000, jitter: 0 })),
      "the lease was renewed"
    )
    const reaped = right(T.reap(renewed, current.lease, "lease_expired", { now: 19_000, jitter: 0 }))
    const next = claimed(reaped, 20_000, policy(2), "t2")
    staleReason(T.reap(next.record, current.lease, "owner_dead", { now: 20_001, jitter: 0 }))
  })

  it("releases at shutdown without a backoff, or fails with shutdown at the limit", () => {
    const current = claimed(queued(), 0, policy(2))
    const released = right(T.release(current.record, current.lease, { now: 5, jitter: 0.7 }))
    assert.strictEqual(released.state, "queued")
    assert.strictEqual(released.not_before, undefined)
    assert.strictEqual(released.attempts[0]?.error?.tag, "shutdown")
    const last = claimed(released, 6, policy(1), "t2")
    const failed = right(T.release(last.record, last.lease, { now: 7, jitter: 0 }))
    assert.strictEqual(failed.state, "failed")
    assert.strictEqual(failed.error?.tag, "shutdown")
  })
})

describe("late outcomes", () => {
  const lost = () => {
    const a = claimed(queued(), 0, policy(2), "A")
    const reaped = right(T.reap(a.record, a.lease, "lease_expired", { now: 20_000, jitter: 0 }))
    const b = claimed(reaped, 30_000, policy(2), "B")
    return { a, b }
  }

  it("keeps what a stale attempt reported on its attempt, once, and never as the result", () => {
    const { a, b } = lost()
    const refused = T.finish(
      b.record,
      a.lease,
      { _tag: "complete", result: "from A" },
      { now: 31_000, jitter: 0 }
    )
    staleReason(refused)
    const kept = T.recordLate(b.record, a.lease, { _tag: "complete", result: "from A" }, 31_000)
    if (kept === undefined) return assert.fail("the late result was not kept")
    assert.deepStrictEqual(kept.attempts[0]?.late, {
      outcome: "complete",
      reported_at: isoTime(31_000),
      result: "from A"
    })
    assert.strictEqual(kept.state, "running")
    assert.strictEqual(kept.result, null)
    assert.deepStrictEqual(kept.lease, b.lease)
    assert.strictEqual(T.recordLate(kept, a.lease, { _tag: "failed", error: fatal }, 32_000), undefined)
    const done = right(
      T.finish(kept, b.lease, { _tag: "complete", result: "from B" }, { now: 33_000, jitter: 0 })
    )
    assert.strictEqual(done.result, "from B")
    assert.strictEqual(done.attempts[0]?.late?.result, "from A")
  })

  it("keeps nothing for an attempt that is still the running one or that never existed", () => {
    const { b } = lost()
    assert.strictEqual(T.recordLate(b.record, b.lease, { _tag: "complete", result: 1 }, 1), undefined)
    assert.strictEqual(
      T.recordLate(b.record, { ...b.lease, attempt: 9 } satisfies Lease, { _tag: "complete", result: 1 }, 1),
      undefined
    )
  })
})
