import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, TestClock } from "effect"
import { ProviderFailed } from "../../src/domain/errors.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import type { ProviderTask } from "../../src/services/Provider.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { runPass } from "../../src/worker/pass.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"
import { echoProviderLayer } from "../../src/providers/layer.js"

const id = (text: string) => ClientRequestId.make(text)
const here = { pid: 100, hostname: "here", bootId: "boot-1", alive: new Set([100, 200]) }
const layers = (provider: Layer.Layer<Provider> = echoProviderLayer) =>
  Layer.mergeAll(memoryTaskStoreLayer(), provider).pipe(Layer.provideMerge(Host.layerTest(here)))
const pass = runPass({ workerId: "test-worker", leaseMillis: 60_000 })
/** A provider that never finishes on its own. */
const slowProvider = Provider.layerTest(() => Effect.never)

describe("worker pass", () => {
  it.effect("runs queued tasks oldest first through the echo provider, then finds nothing", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const older = yield* store.submit({ clientRequestId: id("older"), payload: { n: 1 } })
      yield* TestClock.adjust(Duration.millis(5))
      const newer = yield* store.submit({ clientRequestId: id("newer"), payload: { n: 2 } })
      const report = yield* pass
      assert.deepStrictEqual(report.dispatched, [older.task_id, newer.task_id])
      assert.strictEqual(report.worker_pid, 100)
      const view = yield* store.read(older.task_id, older.payload_sha256)
      assert.strictEqual(view.state, "complete")
      assert.deepStrictEqual(view.result, { echo: { n: 1 }, provider: "fake-echo" })
      assert.strictEqual(view.attempts[0]?.worker_id, "test-worker")
      const second = yield* pass
      assert.deepStrictEqual(second.dispatched, [])
    }).pipe(Effect.provide(layers()))
  )

  it.effect("with a limit: runs the oldest N, says it stopped there, and the next pass takes the rest", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const receipts = yield* Effect.forEach(["a", "b", "c"], (name) =>
        Effect.tap(store.submit({ clientRequestId: id(name), payload: { name } }), () =>
          TestClock.adjust(Duration.millis(1))
        )
      )
      const limited = runPass({ workerId: "test-worker", leaseMillis: 60_000, limit: 2 })
      const first = yield* limited
      assert.deepStrictEqual(
        first.dispatched,
        receipts.slice(0, 2).map((receipt) => receipt.task_id)
      )
      assert.isTrue(first.limit_reached)
      const third = receipts[2]
      assert.isDefined(third)
      assert.strictEqual((yield* store.read(third.task_id, third.payload_sha256)).state, "queued")
      const second = yield* limited
      assert.deepStrictEqual(second.dispatched, [third.task_id])
      assert.isFalse(second.limit_reached, "it ran out of tasks before its limit")
    }).pipe(Effect.provide(layers()))
  )

  it.effect("never reads the whole queue: claims come from claimNext, reaping from running", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      yield* store.submit({ clientRequestId: id("one"), payload: {} })
      const guarded = TaskStore.of({ ...store, live: Effect.die("a worker pass read the whole queue") })
      const report = yield* Effect.provideService(pass, TaskStore, guarded)
      assert.strictEqual(report.dispatched.length, 1)
    }).pipe(Effect.provide(layers()))
  )

  it.effect("fails a task whose provider is unknown, with a reason, and carries on", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const claude = yield* store.submit({
        clientRequestId: id("c"),
        payload: { provider: "nope", prompt: "x" }
      })
      const echo = yield* store.submit({ clientRequestId: id("e"), payload: {} })
      const report = yield* pass
      assert.sameMembers([...report.dispatched], [claude.task_id, echo.task_id])
      const failed = yield* store.read(claude.task_id, claude.payload_sha256)
      assert.strictEqual(failed.state, "failed")
      assert.strictEqual(failed.error?.tag, "UnknownProvider")
      assert.match(failed.error?.message ?? "", /names no provider of this worker/)
      assert.strictEqual((yield* store.read(echo.task_id, echo.payload_sha256)).state, "complete")
    }).pipe(Effect.provide(layers()))
  )

  it.effect("records a provider failure on the task", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const receipt = yield* store.submit({ clientRequestId: id("x"), payload: {} })
      yield* pass
      const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
      assert.strictEqual(view.state, "failed")
      assert.deepStrictEqual(view.error, {
        tag: "ProviderFailed",
        retryable: false,
        message: "scripted: exploded"
      })
    }).pipe(
      Effect.provide(
        layers(
          Provider.layerTest(() =>
            Effect.fail(new ProviderFailed({ provider: "scripted", reason: "exploded", retryable: false }))
          )
        )
      )
    )
  )

  it.effect("sorts running tasks into unknown_running and orphaned, and never runs them", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const seen: Array<ProviderTask> = []
      const claimWith = (name: string, leaseMillis: number) =>
        Effect.gen(function* () {
          const receipt = yield* store.submit({ clientRequestId: id(name), payload: {} })
          const claimed = yield* store.claim(receipt.task_id, { workerId: name, leaseMillis })
          assert.isTrue(Option.isSome(claimed))
          return receipt.task_id
        })
      const live = yield* claimWith("live", 60_000)
      const expired = yield* claimWith("expired", 1_000)
      yield* TestClock.adjust(Duration.seconds(2))
      const report = yield* runPass({ workerId: "w", leaseMillis: 60_000 }).pipe(
        Effect.provide(
          Provider.layerTest((task) => Effect.sync(() => seen.push(task)).pipe(Effect.as({ result: 1 })))
        )
      )
      assert.deepStrictEqual(report.unknown_running, [live])
      assert.deepStrictEqual(
        report.reaped.map((o) => [o.task_id, o.reason, o.worker_id]),
        [[expired, "lease_expired", "expired"]]
      )
      assert.deepStrictEqual(report.dispatched, [])
      assert.deepStrictEqual(seen, [])
    }).pipe(Effect.provide(layers()))
  )

  it.effect("reports a running task whose local owner died as orphaned owner_dead", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const receipt = yield* store.submit({ clientRequestId: id("d"), payload: {} })
      // The store's process (pid 300) claims; the pass runs as pid 999, for which 300 is gone.
      assert.isTrue(
        Option.isSome(yield* store.claim(receipt.task_id, { workerId: "gone", leaseMillis: 60_000 }))
      )
      const report = yield* pass
      assert.deepStrictEqual(
        report.reaped.map((o) => [o.task_id, o.reason]),
        [[receipt.task_id, "owner_dead"]]
      )
      assert.deepStrictEqual(report.unknown_running, [])
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          memoryTaskStoreLayer().pipe(Layer.provide(Host.layerTest({ ...here, pid: 300 }))),
          echoProviderLayer,
          Host.layerTest({ ...here, pid: 999, alive: new Set([999]) })
        )
      )
    )
  )

  it.effect("reports a local lease from an earlier boot as orphaned owner_rebooted", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const receipt = yield* store.submit({ clientRequestId: id("r"), payload: {} })
      assert.isTrue(
        Option.isSome(yield* store.claim(receipt.task_id, { workerId: "old", leaseMillis: 60_000 }))
      )
      const report = yield* pass
      assert.deepStrictEqual(
        report.reaped.map((o) => o.reason),
        ["owner_rebooted"]
      )
    }).pipe(
      Effect.provide(
        Layer.mergeAll(
          memoryTaskStoreLayer().pipe(Layer.provide(Host.layerTest({ ...here, bootId: "boot-0" }))),
          echoProviderLayer,
          Host.layerTest(here)
        )
      )
    )
  )

  it.effect(
    "interrupted between a claim and its attempt, gives the task back instead of holding its lease",
    () =>
      Effect.gen(function* () {
        const store = yield* TaskStore
        const receipt = yield* store.submit({ clientRequestId: id("held"), payload: {} })
        const claimedIt = yield* Deferred.make<void>()
        const gate = yield* Deferred.make<void>()
        // The claim is made, then held open: the interruption arrives after the task is claimed and
        // before its attempt has begun.
        const holding = TaskStore.of({
          ...store,
          claimNext: (request) =>
            store
              .claimNext(request)
              .pipe(
                Effect.zipLeft(Deferred.succeed(claimedIt, undefined)),
                Effect.zipLeft(Deferred.await(gate))
              )
        })
        // Two attempts, so that the one given back leaves the task queued for the next.
        const twice = runPass({
          workerId: "test-worker",
          leaseMillis: 60_000,
          retry: { max_attempts: 2, backoff_initial_ms: 1_000, backoff_max_ms: 1_000 }
        })
        const fiber = yield* Effect.fork(Effect.provideService(twice, TaskStore, holding))
        yield* Deferred.await(claimedIt)
        const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
        yield* Deferred.succeed(gate, undefined)
        const exit = yield* Fiber.join(interrupting)
        assert.isTrue(Exit.isInterrupted(exit))
        const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
        assert.strictEqual(view.state, "queued", "the claim was given back, not left running under its lease")
        assert.strictEqual(view.attempts[0]?.error?.tag, "shutdown")
      }).pipe(Effect.provide(layers(slowProvider)))
  )
})
