/**
 * One attempt of one claimed task (src/worker/attempt.ts), in-process on the memory store:
 * how each provider outcome is written, which failures are retried, and how an attempt ends
 * when its task is cancelled, taken over after a reap, or its worker shuts down. The provider
 * is scripted; whether its fiber was interrupted is observed with an `onInterrupt` flag.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Ref, TestClock, TestServices } from "effect"
import {
  InvalidPayload,
  ModelMismatch,
  OutputTooLarge,
  ProviderFailed,
  ProviderTimeout,
  ProviderUnavailable,
  UnknownProvider
} from "../../src/domain/errors.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import type { AttemptReceipt } from "../../src/domain/provider.js"
import type { JsonObject, RetryPolicy } from "../../src/domain/Task.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import type { ProviderError, ProviderResult, ProviderTask } from "../../src/services/Provider.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { AttemptReport } from "../../src/worker/attempt.js"
import { isRetryable, runAttempt, taskErrorOf } from "../../src/worker/attempt.js"
import { reapOrphans } from "../../src/worker/reap.js"
import { tempFiles } from "../support/restart.js"
import { faultyFileStoreAt, tempDir } from "../support/stores.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

const here = { pid: 100, hostname: "here", bootId: "boot-1" }
const leaseMillis = 60_000
const twoAttempts: RetryPolicy = { max_attempts: 2, backoff_initial_ms: 1_000, backoff_max_ms: 1_000 }
const oneAttempt: RetryPolicy = { max_attempts: 1, backoff_initial_ms: 1_000, backoff_max_ms: 1_000 }

type Run = (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>

/**
 * The memory store, whose `stopCancelled` and `release` also note themselves in `log` (so a test
 * can see that the provider was stopped before the outcome was written), and the provider.
 */
const world = (run: Run, log?: Ref.Ref<ReadonlyArray<string>>) => {
  const note = (entry: string) =>
    log === undefined ? Effect.void : Ref.update(log, (all) => [...all, entry])
  const store = Layer.effect(
    TaskStore,
    Effect.map(TaskStore, (inner) =>
      TaskStore.of({
        ...inner,
        stopCancelled: (taskId, lease, receipt) =>
          Effect.zipRight(note("stopCancelled"), inner.stopCancelled(taskId, lease, receipt)),
        release: (taskId, lease) => Effect.zipRight(note("release"), inner.release(taskId, lease))
      })
    )
  ).pipe(Layer.provide(memoryTaskStoreLayer()))
  return Layer.mergeAll(store, Provider.layerTest(run)).pipe(Layer.provideMerge(Host.layerTest(here)))
}

/** Submit one task and claim it as worker `w1` under `retry`. */
const submitAndClaim = (
  name: string,
  options: { readonly retry: RetryPolicy; readonly leaseMillis?: number; readonly payload?: JsonObject }
) =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const receipt = yield* store.submit({
      clientRequestId: ClientRequestId.make(name),
      payload: options.payload ?? { name }
    })
    const claimed = yield* store.claim(receipt.task_id, {
      workerId: "w1",
      leaseMillis: options.leaseMillis ?? leaseMillis,
      retry: options.retry
    })
    if (Option.isNone(claimed)) return yield* Effect.dieMessage("setup: the task was not claimed")
    return { receipt, claimed: claimed.value }
  })

/**
 * A provider run that signals its start and then waits for `finish` (forever, unless a test
 * completes it); `interrupted` turns true when its fiber is interrupted, which `log` notes too.
 */
const makeProbe = Effect.gen(function* () {
  const started = yield* Deferred.make<ProviderTask>()
  const finish = yield* Deferred.make<ProviderResult>()
  const interrupted = yield* Ref.make(false)
  const log = yield* Ref.make<ReadonlyArray<string>>([])
  const run: Run = (task) =>
    Deferred.succeed(started, task).pipe(
      Effect.zipRight(Deferred.await(finish)),
      Effect.onInterrupt(() =>
        Effect.zipRight(
          Ref.set(interrupted, true),
          Ref.update(log, (all) => [...all, "provider interrupted"])
        )
      )
    )
  return { started, finish, interrupted, log, run }
})

/** Wait for a fiber to end, bounded in real time whatever the test's clock does. */
const joinWithin = <A, E>(fiber: Fiber.Fiber<A, E>, what: string) =>
  Fiber.join(fiber).pipe(
    Effect.timeout("10 seconds"),
    Effect.catchTag("TimeoutException", () => Effect.dieMessage(`${what} did not end within 10 s`)),
    TestServices.provideLive
  )

const failing =
  (error: ProviderError): Run =>
  () =>
    Effect.fail(error)

describe("isRetryable and taskErrorOf", () => {
  const cases: ReadonlyArray<readonly [ProviderError, boolean]> = [
    [new ProviderTimeout({ provider: "claude", millis: 1_000 }), true],
    [new ProviderFailed({ provider: "claude", reason: "exit 3", retryable: true }), true],
    [new ProviderFailed({ provider: "claude", reason: "refused", retryable: false }), false],
    [new InvalidPayload({ provider: "claude", reason: "no prompt" }), false],
    [new UnknownProvider({ provider: "nope", available: ["fake-echo"] }), false],
    [new OutputTooLarge({ provider: "codex", limitBytes: 10 }), false],
    [new ModelMismatch({ provider: "ollama", requested: "a", reported: "b" }), false],
    [new ProviderUnavailable({ provider: "codex", reason: "no executable" }), false]
  ]
  for (const [error, retryable] of cases) {
    const label =
      error._tag === "ProviderFailed" ? `ProviderFailed{retryable:${error.retryable}}` : error._tag
    it(`${label} is ${retryable ? "" : "not "}retryable, and the task keeps that`, () => {
      assert.strictEqual(isRetryable(error), retryable)
      assert.deepStrictEqual(taskErrorOf(error), { tag: error._tag, message: error.message, retryable })
    })
  }

  it("keeps a non-empty stderr tail and the stdout failure field, and cuts a long message", () => {
    const long = new ProviderFailed({
      provider: "claude",
      reason: "x".repeat(2_000),
      retryable: true,
      stderr_tail: "last words",
      stdout_error: "rate limited"
    })
    const kept = taskErrorOf(long)
    assert.strictEqual(kept.stderr_tail, "last words")
    assert.strictEqual(kept.stdout_error, "rate limited")
    assert.strictEqual(kept.message, `${long.message.slice(0, 1_000)} [truncated]`)
    const quiet = taskErrorOf(new ProviderTimeout({ provider: "codex", millis: 5, stderr_tail: "" }))
    assert.isFalse("stderr_tail" in quiet)
  })
})

describe("runAttempt outcomes", () => {
  it.effect("a result completes the task and is stored", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const { receipt, claimed } = yield* submitAndClaim("ok", { retry: twoAttempts })
      const report = yield* runAttempt(claimed, { leaseMillis, cancelPollMillis: 1_000 })
      assert.deepStrictEqual(report.end, { _tag: "complete" })
      assert.strictEqual(report.task_id, receipt.task_id)
      assert.strictEqual(report.attempt, 1)
      assert.strictEqual(report.provider, "fake-echo")
      const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
      assert.strictEqual(view.state, "complete")
      assert.deepStrictEqual(view.result, { answer: "ok" })
      assert.strictEqual(view.attempts[0]?.outcome, "complete")
    }).pipe(
      Effect.provide(world((task) => Effect.succeed({ result: { answer: task.payload["name"] ?? null } })))
    )
  )

  const failures: ReadonlyArray<readonly [string, ProviderError, boolean]> = [
    ["ProviderTimeout", new ProviderTimeout({ provider: "claude", millis: 1_000 }), true],
    [
      "ProviderFailed{retryable:true}",
      new ProviderFailed({ provider: "cli", reason: "exit 3", retryable: true }),
      true
    ],
    [
      "ProviderFailed{retryable:false}",
      new ProviderFailed({ provider: "cli", reason: "no", retryable: false }),
      false
    ],
    ["InvalidPayload", new InvalidPayload({ provider: "claude", reason: "bad model" }), false],
    ["UnknownProvider", new UnknownProvider({ provider: "nope", available: [] }), false],
    ["OutputTooLarge", new OutputTooLarge({ provider: "codex", limitBytes: 10 }), false],
    ["ModelMismatch", new ModelMismatch({ provider: "ollama", requested: "a", reported: "b" }), false],
    ["ProviderUnavailable", new ProviderUnavailable({ provider: "codex", reason: "not set up" }), false]
  ]
  for (const [label, error, retryable] of failures) {
    it.effect(`${label} with attempts left ${retryable ? "queues the task again" : "fails the task"}`, () =>
      Effect.gen(function* () {
        const store = yield* TaskStore
        const { receipt, claimed } = yield* submitAndClaim("f", { retry: twoAttempts })
        const report = yield* runAttempt(claimed, { leaseMillis, cancelPollMillis: 1_000 })
        assert.deepStrictEqual(report.end, {
          _tag: "failed",
          error: { tag: error._tag, message: error.message, retryable },
          requeued: retryable
        })
        const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
        assert.strictEqual(view.state, retryable ? "queued" : "failed")
        assert.strictEqual(view.attempts[0]?.outcome, "failed")
        assert.strictEqual(view.attempts[0]?.error?.tag, error._tag)
        assert.strictEqual(view.attempts[0]?.error?.retryable, retryable)
      }).pipe(Effect.provide(world(failing(error))))
    )
  }

  it.effect("a retryable failure waits out the backoff, and the last attempt's failure is final", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const { receipt, claimed } = yield* submitAndClaim("retry", { retry: twoAttempts })
      const first = yield* runAttempt(claimed, { leaseMillis, cancelPollMillis: 1_000 })
      assert.isTrue(first.end._tag === "failed" && first.end.requeued)
      const queued = yield* store.read(receipt.task_id, receipt.payload_sha256)
      assert.strictEqual(queued.state, "queued")
      // Equal jitter: the wait is in [nominal / 2, nominal] after the failure (at time 0).
      const wait = Date.parse(queued.not_before ?? "") - 0
      assert.isAtLeast(wait, 500)
      assert.isAtMost(wait, 1_000)
      const early = yield* store.claim(receipt.task_id, { workerId: "w1", leaseMillis, retry: twoAttempts })
      assert.isTrue(Option.isNone(early), "claimed before not_before")

      yield* TestClock.adjust(Duration.millis(wait))
      const again = yield* store.claim(receipt.task_id, { workerId: "w1", leaseMillis, retry: twoAttempts })
      if (Option.isNone(again)) return yield* Effect.dieMessage("not claimable at not_before")
      const second = yield* runAttempt(again.value, { leaseMillis, cancelPollMillis: 1_000 })
      assert.strictEqual(second.attempt, 2)
      assert.isTrue(second.end._tag === "failed" && !second.end.requeued)
      const failed = yield* store.read(receipt.task_id, receipt.payload_sha256)
      assert.strictEqual(failed.state, "failed")
      assert.strictEqual(failed.error?.tag, "ProviderTimeout")
      assert.deepStrictEqual(
        failed.attempts.map((a) => a.outcome),
        ["failed", "failed"]
      )
    }).pipe(Effect.provide(world(failing(new ProviderTimeout({ provider: "claude", millis: 5 })))))
  )

  it.effect("a provider that dies fails its task, not retryable, instead of killing the worker", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const { receipt, claimed } = yield* submitAndClaim("defect", { retry: twoAttempts })
      const report = yield* runAttempt(claimed, { leaseMillis, cancelPollMillis: 1_000 })
      assert.isTrue(report.end._tag === "failed" && !report.end.requeued)
      const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
      assert.strictEqual(view.state, "failed")
      assert.strictEqual(view.error?.tag, "ProviderFailed")
      assert.match(view.error?.message ?? "", /provider crashed: .*boom/)
    }).pipe(Effect.provide(world(() => Effect.dieMessage("boom"))))
  )
})

describe("runAttempt cancel", () => {
  it.live("a cancel request is noticed by the poll, well before a heartbeat, and stops the provider", () =>
    Effect.gen(function* () {
      const probe = yield* makeProbe
      yield* Effect.gen(function* () {
        const store = yield* TaskStore
        const { receipt, claimed } = yield* submitAndClaim("cancel", { retry: twoAttempts })
        // The first heartbeat is due after leaseMillis / 3 = 20 s; the poll runs every 20 ms.
        const fiber = yield* Effect.fork(runAttempt(claimed, { leaseMillis, cancelPollMillis: 20 }))
        yield* Deferred.await(probe.started)
        const outcome = yield* store.cancel(receipt.task_id, receipt.payload_sha256)
        assert.deepStrictEqual(outcome, {
          task_id: receipt.task_id,
          cancelled: false,
          cancel_requested: true,
          state: "running"
        })
        const report = yield* joinWithin(fiber, "the cancelled attempt")
        assert.deepStrictEqual(report.end, { _tag: "cancelled" })
        // The provider is stopped before the outcome is written.
        assert.deepStrictEqual(yield* Ref.get(probe.log), ["provider interrupted", "stopCancelled"])
        const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
        assert.strictEqual(view.state, "cancelled")
        assert.strictEqual(view.attempts[0]?.outcome, "cancelled")
        assert.isNotNull(view.cancel_requested_at)
      }).pipe(Effect.provide(world(probe.run, probe.log)))
    })
  )

  it.live("the receipt a stopped provider hands over is the cancelled attempt's receipt", () =>
    Effect.gen(function* () {
      const started = yield* Deferred.make<void>()
      const soFar: AttemptReceipt = {
        provider: "codex",
        requested_model: "m",
        model: null,
        model_evidence: { verified: false, source: "the codex CLI does not report which model answered" },
        started_at: "2026-12-01T00:00:00.000Z",
        ended_at: "2026-12-01T00:00:01.000Z",
        duration_ms: 1000,
        exit_code: null,
        http_status: null,
        usage: null,
        cost_usd: null,
        output_sha256: "a".repeat(64),
        output_bytes: 120,
        events: [{ type: "error", message: "Reconnecting... 1/5" }]
      }
      // As the CLI launcher does: on interrupt, once its processes are stopped, it reports what it had.
      const run: Run = (task) =>
        Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
          Effect.onInterrupt(() => task.onStopped?.(soFar) ?? Effect.void)
        )
      yield* Effect.gen(function* () {
        const store = yield* TaskStore
        const { receipt, claimed } = yield* submitAndClaim("cancel-receipt", { retry: twoAttempts })
        const fiber = yield* Effect.fork(runAttempt(claimed, { leaseMillis, cancelPollMillis: 20 }))
        yield* Deferred.await(started)
        yield* store.cancel(receipt.task_id, receipt.payload_sha256)
        assert.deepStrictEqual((yield* joinWithin(fiber, "the cancelled attempt")).end, { _tag: "cancelled" })
        const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
        assert.strictEqual(view.state, "cancelled")
        assert.deepStrictEqual(view.attempts[0]?.receipt, soFar)
      }).pipe(Effect.provide(world(run)))
    })
  )

  it.effect("the poll notices the request at its next tick, not later", () =>
    Effect.gen(function* () {
      const probe = yield* makeProbe
      yield* Effect.gen(function* () {
        const store = yield* TaskStore
        const { receipt, claimed } = yield* submitAndClaim("tick", { retry: twoAttempts })
        const fiber = yield* Effect.fork(runAttempt(claimed, { leaseMillis, cancelPollMillis: 500 }))
        yield* Deferred.await(probe.started)
        yield* store.cancel(receipt.task_id, receipt.payload_sha256)
        yield* TestClock.adjust(Duration.millis(499))
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "ended before the poll")
        yield* TestClock.adjust(Duration.millis(1))
        const report = yield* joinWithin(fiber, "the attempt after one poll interval")
        assert.deepStrictEqual(report.end, { _tag: "cancelled" })
        assert.isTrue(yield* Ref.get(probe.interrupted))
      }).pipe(Effect.provide(world(probe.run)))
    })
  )

  it.effect("with a slow poll, the heartbeat's answer is what notices the request", () =>
    Effect.gen(function* () {
      const probe = yield* makeProbe
      yield* Effect.gen(function* () {
        const store = yield* TaskStore
        const { receipt, claimed } = yield* submitAndClaim("beat", { retry: twoAttempts, leaseMillis: 3_000 })
        const fiber = yield* Effect.fork(
          runAttempt(claimed, { leaseMillis: 3_000, cancelPollMillis: 3_600_000 })
        )
        yield* Deferred.await(probe.started)
        yield* store.cancel(receipt.task_id, receipt.payload_sha256)
        yield* TestClock.adjust(Duration.millis(1_000))
        const report = yield* joinWithin(fiber, "the attempt after one heartbeat")
        assert.deepStrictEqual(report.end, { _tag: "cancelled" })
        assert.isTrue(yield* Ref.get(probe.interrupted))
        assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "cancelled")
      }).pipe(Effect.provide(world(probe.run)))
    })
  )
})

describe("runAttempt lease", () => {
  /** Another process (pid 999, for which our pid 100 is dead) reaps the task, and "thief" claims it. */
  const takeOver = (taskId: TaskId) =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      const reap = yield* reapOrphans.pipe(
        Effect.provide(Host.layerTest({ ...here, pid: 999, alive: new Set([999]) }))
      )
      assert.deepStrictEqual(
        reap.reaped.map((r) => [r.task_id, r.reason, r.state]),
        [[taskId, "owner_dead", "queued"]]
      )
      // The reaped attempt was retryable: the task waits out its backoff (at most 1 s) first.
      yield* TestClock.adjust(Duration.millis(1_000))
      const stolen = yield* store.claim(taskId, {
        workerId: "thief",
        leaseMillis,
        retry: twoAttempts
      })
      assert.isTrue(Option.isSome(stolen))
    })

  it.effect("heartbeats extend the lease, so a reaper leaves a long attempt alone", () =>
    Effect.gen(function* () {
      const probe = yield* makeProbe
      yield* Effect.gen(function* () {
        const { receipt, claimed } = yield* submitAndClaim("long", { retry: twoAttempts, leaseMillis: 3_000 })
        const fiber = yield* Effect.fork(
          runAttempt(claimed, { leaseMillis: 3_000, cancelPollMillis: 3_600_000 })
        )
        yield* Deferred.await(probe.started)
        for (let i = 0; i < 5; i++) yield* TestClock.adjust(Duration.millis(1_000))
        // 5 s in: the claim's lease (3 s) would have expired without the heartbeats.
        const reap = yield* reapOrphans
        assert.deepStrictEqual(reap.reaped, [])
        assert.deepStrictEqual(reap.live, [receipt.task_id])
        yield* Deferred.succeed(probe.finish, { result: "done" })
        const report = yield* joinWithin(fiber, "the long attempt")
        assert.deepStrictEqual(report.end, { _tag: "complete" })
      }).pipe(Effect.provide(world(probe.run)))
    })
  )

  it.effect(
    "a lease lost to another claimant after a reap ends the attempt stale and stops the provider",
    () =>
      Effect.gen(function* () {
        const probe = yield* makeProbe
        yield* Effect.gen(function* () {
          const store = yield* TaskStore
          const { receipt, claimed } = yield* submitAndClaim("lost", {
            retry: twoAttempts,
            leaseMillis: 6_000
          })
          const fiber = yield* Effect.fork(
            runAttempt(claimed, { leaseMillis: 6_000, cancelPollMillis: 3_600_000 })
          )
          yield* Deferred.await(probe.started)
          yield* takeOver(receipt.task_id)
          // The first heartbeat (at leaseMillis / 3 = 2 s) is refused by the fence.
          yield* TestClock.adjust(Duration.millis(1_000))
          const report = yield* joinWithin(fiber, "the attempt that lost its lease")
          assert.deepStrictEqual(report.end, { _tag: "stale", reason: "task is at attempt 2" })
          assert.isTrue(yield* Ref.get(probe.interrupted), "the provider fiber was not interrupted")
          const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
          assert.strictEqual(view.state, "running")
          assert.strictEqual(view.attempt, 2)
          assert.strictEqual(view.attempts[0]?.error?.tag, "worker_lost")
          assert.isUndefined(view.attempts[0]?.late)
          assert.strictEqual(view.attempts[1]?.worker_id, "thief")
        }).pipe(Effect.provide(world(probe.run)))
      })
  )

  it.effect("a result that arrives after the takeover is kept as late, never as the task's result", () =>
    Effect.gen(function* () {
      const probe = yield* makeProbe
      yield* Effect.gen(function* () {
        const store = yield* TaskStore
        const { receipt, claimed } = yield* submitAndClaim("late", { retry: twoAttempts })
        const fiber = yield* Effect.fork(runAttempt(claimed, { leaseMillis, cancelPollMillis: 3_600_000 }))
        yield* Deferred.await(probe.started)
        yield* takeOver(receipt.task_id)
        yield* Deferred.succeed(probe.finish, { result: { late: true } })
        const report: AttemptReport = yield* joinWithin(fiber, "the late attempt")
        assert.strictEqual(report.end._tag, "stale")
        const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
        assert.strictEqual(view.state, "running")
        assert.isNull(view.result)
        assert.strictEqual(view.attempts[0]?.late?.outcome, "complete")
        assert.deepStrictEqual(view.attempts[0]?.late?.result, { late: true })
      }).pipe(Effect.provide(world(probe.run)))
    })
  )
})

describe("runAttempt interrupted (shutdown)", () => {
  const cases: ReadonlyArray<readonly [RetryPolicy, "queued" | "failed"]> = [
    [twoAttempts, "queued"],
    [oneAttempt, "failed"]
  ]
  for (const [retry, expected] of cases) {
    it.effect(
      `stops the provider and releases the task: ${expected} with max_attempts ${retry.max_attempts}`,
      () =>
        Effect.gen(function* () {
          const probe = yield* makeProbe
          const released = yield* Ref.make<ReadonlyArray<string>>([])
          yield* Effect.gen(function* () {
            const store = yield* TaskStore
            const { receipt, claimed } = yield* submitAndClaim("stop", { retry })
            const fiber = yield* Effect.fork(
              runAttempt(claimed, {
                leaseMillis,
                cancelPollMillis: 1_000,
                onRelease: (state) => Ref.update(released, (all) => [...all, state])
              })
            )
            yield* Deferred.await(probe.started)
            const exit = yield* Fiber.interrupt(fiber)
            assert.isTrue(Exit.isInterrupted(exit))
            assert.deepStrictEqual(yield* Ref.get(probe.log), ["provider interrupted", "release"])
            assert.deepStrictEqual(yield* Ref.get(released), [expected])
            const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
            assert.strictEqual(view.state, expected)
            assert.strictEqual(view.attempts[0]?.outcome, "failed")
            assert.strictEqual(view.attempts[0]?.error?.tag, "shutdown")
            // Given back without a backoff: nothing was wrong with the task.
            assert.isNull(view.not_before)
            if (expected === "failed") assert.strictEqual(view.error?.tag, "shutdown")
          }).pipe(Effect.provide(world(probe.run, probe.log)))
        })
    )
  }
})

describe("runAttempt interrupted while writing its outcome", () => {
  it.scopedLive("does not leave the task running under its lease: it is either recorded or given back", () =>
    Effect.gen(function* () {
      // The file store over the fault-injecting FileSystem: the completion's record fsync is held
      // (a slow disk), and the worker shuts down right then.
      const root = yield* tempDir
      const { store, plan } = yield* faultyFileStoreAt(root, here)
      const receipt = yield* store.submit({ clientRequestId: ClientRequestId.make("slow"), payload: {} })
      const claimed = yield* store.claim(receipt.task_id, { workerId: "w1", leaseMillis, retry: oneAttempt })
      if (Option.isNone(claimed)) return yield* Effect.dieMessage("setup: the task was not claimed")
      const released = yield* Ref.make<ReadonlyArray<string>>([])
      const hold = yield* plan.holdAt("sync", 1)
      const run: Run = () => Effect.as(plan.arm({ _tag: "None" }), { result: "done" })
      const fiber = yield* Effect.fork(
        runAttempt(claimed.value, {
          leaseMillis,
          cancelPollMillis: 60_000,
          onRelease: (state) => Ref.update(released, (all) => [...all, state])
        }).pipe(Effect.provide(Layer.mergeAll(Layer.succeed(TaskStore, store), Provider.layerTest(run))))
      )
      yield* Deferred.await(hold.reached).pipe(Effect.timeout("10 seconds"))
      yield* Fiber.interrupt(fiber).pipe(
        Effect.raceFirst(Effect.delay(Deferred.succeed(hold.release, undefined), "2 seconds"))
      )
      yield* Deferred.succeed(hold.release, undefined)
      yield* Fiber.await(fiber).pipe(Effect.timeout("10 seconds"))

      const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
      const outcome = {
        state: view.state,
        released: yield* Ref.get(released),
        temp_files: yield* tempFiles(root, "tasks")
      }
      assert.notStrictEqual(view.state, "running", `left ${JSON.stringify(outcome)}`)
      if (view.state !== "complete") assert.deepStrictEqual(outcome.released, [view.state])
    })
  )
})
