/**
 * The watching worker (src/worker/watch.ts), in-process on the memory store under the
 * TestClock (test/support/watchWorld.ts): concurrency and caps as the worker applies them,
 * claims on wake-ups, freed slots and retries coming due, periodic reaping, cancels, and
 * graceful and forced shutdown. The slot bookkeeping itself is tested in slots.test.ts.
 */
import { assert, describe } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Ref, TestClock, TestServices } from "effect"
import { ProviderTimeout } from "../../src/domain/errors.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { twoAttempts, eventually, joinWithin, makeWorld, stopWith, scoped } from "../support/watchWorld.js"

describe("runWatch concurrency", () => {
  scoped("never runs more than `concurrency` attempts at once", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const receipts = yield* Effect.forEach([1, 2, 3, 4, 5, 6], (n) => world.submit(`t${n}`))
      const fiber = yield* world.start({ concurrency: 2 })
      yield* eventually(
        "the first look at the queue",
        Effect.map(world.looks, (n) => n >= 1)
      )
      assert.strictEqual(yield* world.countOf("claimed"), 2, "claims in the first look")
      yield* eventually(
        "two runs",
        Effect.map(world.running, (n) => n === 2)
      )
      yield* world.openGate
      yield* eventually(
        "six finished attempts",
        Effect.map(world.countOf("finished"), (n) => n === 6)
      )
      assert.strictEqual((yield* Ref.get(world.peak)).total, 2)
      for (const receipt of receipts) assert.strictEqual((yield* world.read(receipt)).state, "complete")
      const summary = yield* stopWith(world, fiber)
      assert.deepStrictEqual(summary, {
        reason: "SIGTERM",
        finished: 6,
        failed: 0,
        retried: 0,
        cancelled: 0,
        released: 0,
        reaped: 0
      })
    })
  )

  scoped("keeps each provider within its cap; payloads without a provider count as fake-echo", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const a1 = yield* world.submit("a1", { provider: "a", n: 1 })
      yield* world.submit("a2", { provider: "a", n: 2 })
      const e1 = yield* world.submit("e1", { n: 3 })
      yield* world.submit("e2", { n: 4 })
      const b1 = yield* world.submit("b1", { provider: "b", n: 5 })
      const fiber = yield* world.start({
        concurrency: 4,
        maxPerProvider: new Map([
          ["a", 1],
          ["fake-echo", 1]
        ])
      })
      yield* eventually(
        "the first look at the queue",
        Effect.map(world.looks, (n) => n >= 1)
      )
      const claimed = yield* world.eventsOf("claimed")
      assert.deepStrictEqual(
        claimed.map((e) => [e.task_id, e.provider]),
        [
          [a1.task_id, "a"],
          [e1.task_id, "fake-echo"],
          [b1.task_id, "b"]
        ]
      )
      yield* eventually(
        "three runs",
        Effect.map(world.running, (n) => n === 3)
      )
      yield* world.openGate
      yield* eventually(
        "five finished attempts",
        Effect.map(world.countOf("finished"), (n) => n === 5)
      )
      const peak = yield* Ref.get(world.peak)
      assert.strictEqual(peak.byProvider.get("a"), 1)
      assert.strictEqual(peak.byProvider.get("fake-echo"), 1)
      assert.isAtMost(peak.total, 3)
      const started = yield* world.eventsOf("started")
      assert.deepStrictEqual(started[0]?.max_per_provider, { a: 1, "fake-echo": 1 })
      assert.strictEqual((yield* stopWith(world, fiber)).finished, 5)
    })
  )
  scoped("freed slots claim the rest one batch at a time, never reading the queue", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const receipts = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, n) => n),
        (n) => world.submit(`t${n}`)
      )
      const fiber = yield* world.start({ concurrency: 2 })
      yield* eventually(
        "two runs",
        Effect.map(world.running, (n) => n === 2)
      )
      yield* world.openGate
      yield* eventually(
        "twenty finished attempts",
        Effect.map(world.countOf("finished"), (n) => n === 20)
      )
      // The world's store dies on `live`: reaching here means no look read the queue. One claim
      // fills both slots, each freed slot claims once more (a slot may free while the other's
      // claim runs, so two can share one), and the last finds the queue empty.
      const looks = yield* world.looks
      assert.isAtLeast(looks, 10)
      assert.isAtMost(looks, 21)
      assert.sameMembers(
        (yield* world.eventsOf("claimed")).map((event) => event.task_id),
        receipts.map((receipt) => receipt.task_id),
        "each claimed once"
      )
      assert.strictEqual((yield* world.eventsOf("claimed")).length, 20)
      yield* stopWith(world, fiber)
    })
  )

  scoped("a freed slot asks for nothing when the last claim found no more work", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      yield* world.submit("t1")
      const fiber = yield* world.start({ concurrency: 2, pollMillis: 600_000 })
      yield* eventually(
        "the run",
        Effect.map(world.running, (n) => n === 1)
      )
      const before = yield* world.looks
      yield* world.openGate
      yield* eventually(
        "the finished attempt",
        Effect.map(world.countOf("finished"), (n) => n === 1)
      )
      // The first claim asked for two and got one: the queue held nothing more, so the freed
      // slot waits for a wake-up or the poll instead of asking again.
      yield* Effect.sleep(Duration.millis(50)).pipe(TestServices.provideLive)
      assert.strictEqual(yield* world.looks, before)
      yield* stopWith(world, fiber)
    })
  )

  scoped("a task cancelled while every slot is busy is never run", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const first = yield* world.submit("t1")
      const second = yield* world.submit("t2")
      const third = yield* world.submit("t3")
      const fiber = yield* world.start({ concurrency: 1 })
      yield* eventually(
        "the first run",
        Effect.map(world.running, (n) => n === 1)
      )
      assert.isTrue((yield* world.store.cancel(second.task_id, second.payload_sha256)).cancelled)
      yield* world.openGate
      yield* eventually(
        "two finished attempts",
        Effect.map(world.countOf("finished"), (n) => n === 2)
      )
      assert.deepStrictEqual(
        (yield* Ref.get(world.calls)).map((call) => call.taskId),
        [first.task_id, third.task_id]
      )
      assert.strictEqual((yield* world.read(second)).state, "cancelled")
      assert.strictEqual((yield* world.read(third)).state, "complete")
      yield* stopWith(world, fiber)
    })
  )
})

describe("runWatch wake-ups and timers", () => {
  scoped("a submission wakes the worker at once, with no poll", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld()
      const fiber = yield* world.start({ pollMillis: 600_000 })
      yield* eventually(
        "the first look at an empty queue",
        Effect.map(world.looks, (n) => n >= 1)
      )
      const receipt = yield* world.store.submit({
        clientRequestId: ClientRequestId.make("late"),
        payload: {}
      })
      // The TestClock stands still: only the store's wake-up can start this task.
      yield* eventually(
        "the submitted task to finish",
        Effect.map(world.read(receipt), (view) => view.state === "complete")
      )
      assert.strictEqual((yield* stopWith(world, fiber)).finished, 1)
    })
  )

  scoped("a retried task is not claimed before its not_before, and is claimed right then", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({
        script: (task) =>
          task.attempt === 1
            ? Effect.fail(new ProviderTimeout({ provider: "scripted", millis: 5 }))
            : Effect.succeed({ result: "second time lucky" })
      })
      const receipt = yield* world.submit("flaky")
      const fiber = yield* world.start({ pollMillis: 600_000 })
      yield* eventually(
        "the failed attempt and the look after it",
        Effect.map(
          Effect.all([world.countOf("finished"), world.looks]),
          ([finished, looks]) => finished === 1 && looks >= 2
        )
      )
      const queued = yield* world.read(receipt)
      assert.strictEqual(queued.state, "queued")
      const notBefore = Date.parse(queued.not_before ?? "")
      const now = yield* TestClock.currentTimeMillis
      assert.isAbove(notBefore, now, "the backoff is in the future")

      yield* TestClock.adjust(Duration.millis(notBefore - now - 1))
      assert.strictEqual((yield* Ref.get(world.calls)).length, 1, "claimed before not_before")
      yield* TestClock.adjust(Duration.millis(1))
      yield* eventually(
        "the second attempt to complete",
        Effect.map(world.read(receipt), (view) => view.state === "complete")
      )
      const done = yield* world.read(receipt)
      assert.strictEqual(done.attempts[1]?.started_at, queued.not_before)
      const summary = yield* stopWith(world, fiber)
      assert.strictEqual(summary.retried, 1)
      assert.strictEqual(summary.finished, 1)
    })
  )

  scoped("each poll reaps orphans: a task whose worker died is taken back, with a reaped event", () =>
    Effect.gen(function* () {
      // The store stamps claims with pid 300, another worker on this host; the watcher is pid 100.
      const alive = new Set([100, 300])
      const world = yield* makeWorld({
        storeHost: { pid: 300, hostname: "here", bootId: "boot-1" },
        host: { pid: 100, hostname: "here", bootId: "boot-1", alive }
      })
      const receipt = yield* world.submit("orphan", { provider: "x" })
      const claimed = yield* world.store.claim(receipt.task_id, {
        workerId: "other",
        leaseMillis: 600_000,
        retry: twoAttempts
      })
      assert.isTrue(Option.isSome(claimed))
      // The watcher may not run "x" at all, so the reaped task stays where the reap put it.
      const fiber = yield* world.start({ pollMillis: 5_000, maxPerProvider: new Map([["x", 0]]) })
      yield* eventually(
        "the first look",
        Effect.map(world.looks, (n) => n >= 1)
      )
      assert.strictEqual(yield* world.countOf("reaped"), 0, "reaped while its worker was alive")

      alive.delete(300)
      yield* TestClock.adjust(Duration.millis(5_000))
      yield* eventually(
        "a reaped event",
        Effect.map(world.countOf("reaped"), (n) => n === 1)
      )
      const [reaped] = yield* world.eventsOf("reaped")
      assert.deepStrictEqual(
        { task_id: reaped?.task_id, attempt: reaped?.attempt, reason: reaped?.reason, state: reaped?.state },
        { task_id: receipt.task_id, attempt: 1, reason: "owner_dead", state: "queued" }
      )
      const view = yield* world.read(receipt)
      assert.strictEqual(view.state, "queued")
      assert.strictEqual(view.attempts[0]?.error?.tag, "worker_lost")
      assert.strictEqual((yield* stopWith(world, fiber)).reaped, 1)
    })
  )
})

describe("runWatch cancel", () => {
  scoped("a cancel request stops the running attempt at the next poll and is counted", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const receipt = yield* world.submit("doomed")
      const fiber = yield* world.start({ cancelPollMillis: 500 })
      yield* eventually(
        "one run",
        Effect.map(world.running, (n) => n === 1)
      )
      const outcome = yield* world.store.cancel(receipt.task_id, receipt.payload_sha256)
      assert.isTrue(outcome.cancel_requested)
      yield* TestClock.adjust(Duration.millis(500))
      yield* eventually(
        "the cancelled attempt",
        Effect.map(world.countOf("finished"), (n) => n === 1)
      )
      const [finished] = yield* world.eventsOf("finished")
      assert.strictEqual(finished?.outcome, "cancelled")
      assert.deepStrictEqual(yield* Ref.get(world.interrupted), [receipt.task_id])
      assert.strictEqual((yield* world.read(receipt)).state, "cancelled")
      const summary = yield* stopWith(world, fiber)
      assert.strictEqual(summary.cancelled, 1)
      assert.strictEqual(summary.finished, 0)
    })
  )
})

describe("runWatch shutdown", () => {
  scoped("SIGTERM: no more claims, the running attempt finishes within the grace", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const first = yield* world.submit("first")
      const rest = yield* Effect.forEach(["second", "third"], (name) => world.submit(name))
      const fiber = yield* world.start({ concurrency: 1, graceMillis: 30_000 })
      yield* eventually(
        "one run",
        Effect.map(world.running, (n) => n === 1)
      )
      yield* world.shutdown.signal("SIGTERM")
      yield* eventually(
        "the stopping event",
        Effect.map(world.countOf("stopping"), (n) => n === 1)
      )
      const [stopping] = yield* world.eventsOf("stopping")
      assert.deepStrictEqual(
        { reason: stopping?.reason, running: stopping?.running, grace_ms: stopping?.grace_ms },
        { reason: "SIGTERM", running: 1, grace_ms: 30_000 }
      )
      yield* world.openGate
      const summary = yield* joinWithin(fiber, "the watch after SIGTERM")
      assert.deepStrictEqual(summary, {
        reason: "SIGTERM",
        finished: 1,
        failed: 0,
        retried: 0,
        cancelled: 0,
        released: 0,
        reaped: 0
      })
      assert.strictEqual((yield* Ref.get(world.calls)).length, 1)
      assert.strictEqual((yield* world.read(first)).state, "complete")
      for (const receipt of rest) {
        const view = yield* world.read(receipt)
        assert.deepStrictEqual([view.state, view.attempt], ["queued", 0])
      }
      const kinds = (yield* world.events).map((e) => e.event)
      assert.deepStrictEqual(kinds, ["started", "claimed", "stopping", "finished", "stopped"])
      const [stopped] = yield* world.eventsOf("stopped")
      assert.deepStrictEqual([stopped?.reason, stopped?.finished, stopped?.released], ["SIGTERM", 1, 0])
    })
  )

  scoped("when the grace runs out, running attempts are interrupted and their tasks released", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const receipts = yield* Effect.forEach(["one", "two"], (name) => world.submit(name))
      const fiber = yield* world.start({ concurrency: 2, graceMillis: 5_000 })
      yield* eventually(
        "two runs",
        Effect.map(world.running, (n) => n === 2)
      )
      yield* world.shutdown.signal("SIGTERM")
      yield* eventually(
        "the stopping event",
        Effect.map(world.countOf("stopping"), (n) => n === 1)
      )
      yield* TestClock.adjust(Duration.millis(4_999))
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "stopped before the grace ran out")
      assert.deepStrictEqual(yield* Ref.get(world.interrupted), [])
      yield* TestClock.adjust(Duration.millis(1))
      const summary = yield* joinWithin(fiber, "the watch after its grace")
      assert.deepStrictEqual(summary, {
        reason: "SIGTERM",
        finished: 0,
        failed: 0,
        retried: 0,
        cancelled: 0,
        released: 2,
        reaped: 0
      })
      assert.sameMembers(
        [...(yield* Ref.get(world.interrupted))],
        receipts.map((r) => r.task_id)
      )
      for (const receipt of receipts) {
        const view = yield* world.read(receipt)
        assert.strictEqual(view.state, "queued")
        assert.strictEqual(view.attempts[0]?.error?.tag, "shutdown")
      }
      const released = yield* world.eventsOf("released")
      assert.sameMembers(
        released.map((e) => `${e.task_id}@${e.attempt}:${e.state}`),
        receipts.map((r) => `${r.task_id}@1:queued`)
      )
    })
  )

  scoped("a second signal stops at once: reason forced, without waiting the grace", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ gated: true })
      const receipt = yield* world.submit("stuck")
      const fiber = yield* world.start({ graceMillis: 600_000 })
      yield* eventually(
        "one run",
        Effect.map(world.running, (n) => n === 1)
      )
      yield* world.shutdown.signal("SIGTERM")
      yield* eventually(
        "the stopping event",
        Effect.map(world.countOf("stopping"), (n) => n === 1)
      )
      yield* world.shutdown.signal("SIGINT")
      // The TestClock never moves: the 10-minute grace cannot have run out.
      const summary = yield* joinWithin(fiber, "the watch after a second signal")
      assert.strictEqual(summary.reason, "forced")
      assert.strictEqual(summary.released, 1)
      assert.deepStrictEqual(yield* Ref.get(world.interrupted), [receipt.task_id])
      assert.strictEqual((yield* world.read(receipt)).state, "queued")
      const [stopped] = yield* world.eventsOf("stopped")
      assert.strictEqual(stopped?.reason, "forced")
    })
  )
})
