/**
 * Issue 5, requirements 10 and 11: the lease fence under a stale owner and under a reaper racing
 * a completion.
 *
 * 10. Worker A's lease expires and B reclaims the task: A's completion is refused, B's result
 *     stands, and both side effects are recorded (A's outcome as `late` on its attempt). Once
 *     in-process with time under the TestClock, once with real worker processes and SIGSTOP.
 * 11. A task completing (or heartbeating) while the reaper looks at it ends complete (or stays
 *     running), never requeued: deterministically, then as a hammer of real races on the file store.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import {
  Deferred,
  Duration,
  Effect,
  Either,
  Fiber,
  Layer,
  Logger,
  LogLevel,
  Option,
  Ref,
  Schema,
  TestClock
} from "effect"
import * as path from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import type { RetryPolicy, TaskView } from "../../src/domain/Task.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import type { ProviderTask } from "../../src/services/Provider.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { ClaimedTask } from "../../src/services/TaskStore.js"
import { runAttempt } from "../../src/worker/attempt.js"
import { runPass } from "../../src/worker/pass.js"
import { reapSnapshot } from "../../src/worker/reap.js"
import { tempDir } from "../support/stores.js"
import {
  continueProcess,
  effectsOf,
  logsOf,
  processState,
  scriptedPayload,
  stopOutside,
  terminate,
  useChaos,
  waitUntil,
  within
} from "./support-fence.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"

const here = { pid: 100, hostname: "here", bootId: "boot-1" }
/** Two attempts, one second apart at most: a reaped attempt 1 leaves room for attempt 2. */
const twoAttempts: RetryPolicy = { max_attempts: 2, backoff_initial_ms: 1_000, backoff_max_ms: 1_000 }

type StoreLayer = Layer.Layer<TaskStore | Host, unknown, Scope.Scope>
const storeKinds: ReadonlyArray<{ readonly name: string; readonly layer: StoreLayer }> = [
  { name: "memory", layer: memoryTaskStoreLayer().pipe(Layer.provideMerge(Host.layerTest(here))) },
  {
    name: "file",
    layer: Layer.unwrapScoped(
      Effect.map(tempDir, (root) =>
        fileTaskStoreLayer({ root }).pipe(
          Layer.provideMerge(Host.layerTest(here)),
          Layer.provide(nodeContextLayer)
        )
      )
    )
  }
]

/** The reaper's info lines and a stale attempt's warning are expected here: keep the output clean. */
const quiet = Logger.withMinimumLogLevel(LogLevel.Error)

const claimed = (claim: Option.Option<ClaimedTask>): ClaimedTask =>
  Option.getOrThrowWith(claim, () => new Error("the task was not claimed"))

const submitOne = (name: string) =>
  Effect.flatMap(TaskStore, (store) =>
    store.submit({ clientRequestId: ClientRequestId.make(name), payload: { name } })
  )

const readTask = (receipt: { readonly task_id: TaskId; readonly payload_sha256: string }) =>
  Effect.flatMap(TaskStore, (store) => store.read(receipt.task_id, receipt.payload_sha256))

const attemptOf = (view: TaskView, n: number) => {
  const attempt = view.attempts.find((entry) => entry.attempt === n)
  if (attempt === undefined) throw new Error(`no attempt ${n} in ${JSON.stringify(view.attempts)}`)
  return attempt
}

describe("stale fence, in-process (10a)", () => {
  for (const kind of storeKinds) {
    it.scoped(
      `${kind.name}: A's lease expires, B reclaims and completes; A's completion is refused and kept as late`,
      () =>
        Effect.gen(function* () {
          const store = yield* TaskStore
          const sideEffects = yield* Ref.make<ReadonlyArray<string>>([])
          const note = (line: string) => Ref.update(sideEffects, (lines) => [...lines, line])
          const aStarted = yield* Deferred.make<void>()
          const aMayReturn = yield* Deferred.make<void>()
          // Attempt 1 (A) does its work and then waits at the gate; attempt 2 (B) answers at once.
          const provider = Provider.layerTest((task: ProviderTask) =>
            task.attempt === 1
              ? Effect.gen(function* () {
                  yield* note("A did its work")
                  yield* Deferred.succeed(aStarted, undefined)
                  yield* Deferred.await(aMayReturn)
                  return { result: { by: "A", attempt: task.attempt } }
                })
              : Effect.as(note("B did its work"), { result: { by: "B", attempt: task.attempt } })
          )
          const receipt = yield* submitOne("fenced")

          // A claims a 1 s lease but its heartbeat is due only every 200 s: A stalls (paused,
          // swapped out) past its lease, so nothing renews it.
          const a = claimed(
            yield* store.claim(receipt.task_id, { workerId: "A", leaseMillis: 1_000, retry: twoAttempts })
          )
          const aRun = yield* runAttempt(a, { leaseMillis: 600_000, cancelPollMillis: 600_000 }).pipe(
            Effect.provide(provider),
            Effect.fork
          )
          yield* Deferred.await(aStarted)
          yield* TestClock.adjust(Duration.seconds(2))

          // B's first pass reaps A's attempt; the task waits out its backoff (≤ 1 s).
          const reaping = yield* runPass({ workerId: "B", leaseMillis: 60_000, retry: twoAttempts }).pipe(
            Effect.provide(provider)
          )
          assert.deepStrictEqual(
            reaping.reaped.map((r) => [r.task_id, r.reason, r.attempt, r.worker_id, r.state]),
            [[receipt.task_id, "lease_expired", 1, "A", "queued"]]
          )
          assert.deepStrictEqual(reaping.dispatched, [])
          assert.strictEqual((yield* readTask(receipt)).state, "queued")

          yield* TestClock.adjust(Duration.seconds(1))
          const running = yield* runPass({ workerId: "B", leaseMillis: 60_000, retry: twoAttempts }).pipe(
            Effect.provide(provider)
          )
          assert.deepStrictEqual(running.dispatched, [receipt.task_id])
          const afterB = yield* readTask(receipt)
          assert.strictEqual(afterB.state, "complete")
          assert.deepStrictEqual(afterB.result, { by: "B", attempt: 2 })

          // Now A's provider returns: its completion is fenced out and kept as late.
          yield* Deferred.succeed(aMayReturn, undefined)
          const aReport = yield* Fiber.join(aRun)
          assert.strictEqual(aReport.attempt, 1)
          assert.deepStrictEqual(aReport.end, {
            _tag: "stale",
            reason: `attempt 1 of task ${receipt.task_id} no longer holds the task: task is complete`
          })
          // Said directly: A's completion gets StaleAttempt, and changes nothing.
          const again = yield* Effect.either(
            store.complete(receipt.task_id, a.lease, { by: "A", again: true })
          )
          assert.isTrue(Either.isLeft(again) && again.left._tag === "StaleAttempt", JSON.stringify(again))

          const view = yield* readTask(receipt)
          assert.strictEqual(view.state, "complete")
          assert.strictEqual(view.attempt, 2)
          assert.deepStrictEqual(view.result, { by: "B", attempt: 2 }, "B's result stands")
          assert.isNull(view.error)
          const first = attemptOf(view, 1)
          assert.strictEqual(first.worker_id, "A")
          assert.strictEqual(first.outcome, "failed")
          assert.strictEqual(first.error?.tag, "worker_lost")
          assert.strictEqual(first.error?.retryable, true)
          assert.strictEqual(first.late?.outcome, "complete")
          assert.deepStrictEqual(first.late?.result, { by: "A", attempt: 1 }, "A's result is kept as late")
          const second = attemptOf(view, 2)
          assert.strictEqual(second.worker_id, "B")
          assert.strictEqual(second.outcome, "complete")
          assert.isUndefined(second.late)
          assert.deepStrictEqual(yield* Ref.get(sideEffects), ["A did its work", "B did its work"])
        }).pipe(Effect.provide(kind.layer), quiet)
    )

    it.scoped(
      `${kind.name}: A's outcome arriving while B runs is refused; B's result stands and A's is late`,
      () =>
        Effect.gen(function* () {
          const store = yield* TaskStore
          const receipt = yield* submitOne("overlap")
          const a = claimed(
            yield* store.claim(receipt.task_id, { workerId: "A", leaseMillis: 1_000, retry: twoAttempts })
          )
          yield* TestClock.adjust(Duration.seconds(2))
          const snapshot = yield* store.live
          const reaped = yield* reapSnapshot(snapshot)
          assert.deepStrictEqual(
            reaped.reaped.map((r) => r.state),
            ["queued"]
          )
          yield* TestClock.adjust(Duration.seconds(1))
          const b = claimed(
            yield* store.claim(receipt.task_id, { workerId: "B", leaseMillis: 60_000, retry: twoAttempts })
          )
          assert.strictEqual(b.lease.attempt, 2)

          // A, still believing it owns the task: every write is refused while B holds it.
          const beat = yield* Effect.either(store.heartbeat(receipt.task_id, a.lease, 1_000))
          assert.isTrue(Either.isLeft(beat) && beat.left._tag === "StaleAttempt", JSON.stringify(beat))
          const late = yield* Effect.either(store.complete(receipt.task_id, a.lease, { by: "A" }))
          assert.isTrue(Either.isLeft(late) && late.left._tag === "StaleAttempt", JSON.stringify(late))
          const during = yield* readTask(receipt)
          assert.strictEqual(during.state, "running")
          assert.strictEqual(during.attempt, 2)
          assert.deepStrictEqual(attemptOf(during, 1).late?.result, { by: "A" })
          const lateAt = attemptOf(during, 1).late?.reported_at
          // A second late report (a failure now) neither replaces the first nor touches B.
          yield* TestClock.adjust(Duration.millis(10))
          const lateFail = yield* Effect.either(
            store.fail(receipt.task_id, a.lease, { tag: "ProviderFailed", message: "late", retryable: true })
          )
          assert.isTrue(
            Either.isLeft(lateFail) && lateFail.left._tag === "StaleAttempt",
            JSON.stringify(lateFail)
          )

          assert.strictEqual(yield* store.complete(receipt.task_id, b.lease, { by: "B" }), "complete")
          const view = yield* readTask(receipt)
          assert.strictEqual(view.state, "complete")
          assert.deepStrictEqual(view.result, { by: "B" })
          assert.strictEqual(attemptOf(view, 1).late?.outcome, "complete")
          assert.strictEqual(attemptOf(view, 1).late?.reported_at, lateAt)
          assert.strictEqual(attemptOf(view, 2).outcome, "complete")
        }).pipe(Effect.provide(kind.layer), quiet)
    )
  }
})

describe("rescue against completion, in-process (11)", () => {
  for (const kind of storeKinds) {
    it.scoped(`${kind.name}: a completion after the reaper's snapshot wins; the reap is refused`, () =>
      Effect.gen(function* () {
        const store = yield* TaskStore
        const receipt = yield* submitOne("completes")
        const owner = claimed(
          yield* store.claim(receipt.task_id, { workerId: "owner", leaseMillis: 1_000, retry: twoAttempts })
        )
        yield* TestClock.adjust(Duration.seconds(2))
        // The reaper's view: running, with a lease that expired.
        const snapshot = yield* store.live
        assert.deepStrictEqual(
          snapshot.running.map((record) => [record.task_id, record.state]),
          [[receipt.task_id, "running"]]
        )
        const seen = snapshot.running[0]?.lease
        if (!seen) throw new Error("no lease in the snapshot")
        assert.isBelow(Date.parse(seen.expires_at), yield* TestClock.currentTimeMillis)

        assert.strictEqual(yield* store.complete(receipt.task_id, owner.lease, { done: true }), "complete")

        const report = yield* reapSnapshot(snapshot)
        assert.deepStrictEqual(report.reaped, [])
        assert.deepStrictEqual(report.left_alone, [receipt.task_id])
        const direct = yield* Effect.either(store.reap(receipt.task_id, seen, "lease_expired"))
        assert.isTrue(Either.isLeft(direct) && direct.left._tag === "StaleAttempt", JSON.stringify(direct))

        const view = yield* readTask(receipt)
        assert.strictEqual(view.state, "complete")
        assert.deepStrictEqual(view.result, { done: true })
        assert.strictEqual(view.attempt, 1)
        assert.deepStrictEqual(
          view.attempts.map((entry) => [entry.outcome, entry.error, entry.late]),
          [["complete", null, undefined]]
        )
        assert.deepStrictEqual((yield* store.live).queued, [])
      }).pipe(Effect.provide(kind.layer), quiet)
    )

    it.scoped(`${kind.name}: a heartbeat after the reaper's snapshot wins: "the lease was renewed"`, () =>
      Effect.gen(function* () {
        const store = yield* TaskStore
        const receipt = yield* submitOne("heartbeats")
        const owner = claimed(
          yield* store.claim(receipt.task_id, { workerId: "owner", leaseMillis: 1_000, retry: twoAttempts })
        )
        yield* TestClock.adjust(Duration.seconds(2))
        const snapshot = yield* store.live
        const seen = snapshot.running[0]?.lease
        if (!seen) throw new Error("no lease in the snapshot")

        const beat = yield* store.heartbeat(receipt.task_id, owner.lease, 1_000)
        assert.isAbove(Date.parse(beat.lease.expires_at), yield* TestClock.currentTimeMillis)

        const direct = yield* Effect.either(store.reap(receipt.task_id, seen, "lease_expired"))
        assert.isTrue(
          Either.isLeft(direct) &&
            direct.left._tag === "StaleAttempt" &&
            direct.left.reason === "the lease was renewed",
          JSON.stringify(direct)
        )
        const report = yield* reapSnapshot(snapshot)
        assert.deepStrictEqual(report.reaped, [])
        assert.deepStrictEqual(report.left_alone, [receipt.task_id])
        const during = yield* readTask(receipt)
        assert.strictEqual(during.state, "running")
        assert.strictEqual(attemptOf(during, 1).outcome, "running")

        // The owner still holds the task and finishes it.
        assert.strictEqual(yield* store.complete(receipt.task_id, beat.lease, { done: true }), "complete")
        const view = yield* readTask(receipt)
        assert.strictEqual(view.state, "complete")
        assert.deepStrictEqual(view.result, { done: true })
      }).pipe(Effect.provide(kind.layer), quiet)
    )
  }
})

const Iterations = 60

describe("rescue against completion, hammered on the file store (11)", () => {
  it.scopedLive(
    `${Iterations} races of a completion against a reap: exactly one wins, and a complete task is never requeued`,
    () =>
      Effect.gen(function* () {
        const store = yield* TaskStore
        const tally = { completed: 0, reaped: 0 }
        for (let i = 0; i < Iterations; i++) {
          const receipt = yield* submitOne(`race-${i}`)
          // Odd iterations may run out of attempts when reaped: failed rather than queued.
          const retry = i % 2 === 0 ? twoAttempts : { ...twoAttempts, max_attempts: 1 }
          const owner = claimed(
            yield* store.claim(receipt.task_id, { workerId: "owner", leaseMillis: 1, retry })
          )
          yield* Effect.sleep(Duration.millis(3))
          const snapshot = yield* store.live
          const mine = snapshot.running.filter((record) => record.task_id === receipt.task_id)
          assert.strictEqual(mine.length, 1, "the reaper sees the task running")
          const result = { by: "owner", i }
          const complete = Effect.either(store.complete(receipt.task_id, owner.lease, result))
          const reap = reapSnapshot({ ...snapshot, running: mine })
          // Alternate who is started first; both run at once either way.
          const [completed, reaped] =
            i % 4 < 2
              ? yield* Effect.all([complete, reap], { concurrency: 2 })
              : yield* Effect.map(
                  Effect.all([reap, complete], { concurrency: 2 }),
                  ([r, c]) => [c, r] as const
                )

          const view = yield* readTask(receipt)
          const first = attemptOf(view, 1)
          const context = JSON.stringify({ i, completed, reaped, view })
          if (Either.isRight(completed)) {
            tally.completed++
            assert.strictEqual(completed.right, "complete", context)
            assert.deepStrictEqual(reaped.reaped, [], context)
            assert.deepStrictEqual(reaped.left_alone, [receipt.task_id], context)
            assert.strictEqual(view.state, "complete", context)
            assert.deepStrictEqual(view.result, result, context)
            assert.strictEqual(first.outcome, "complete", context)
            assert.isUndefined(first.late, context)
          } else {
            tally.reaped++
            assert.strictEqual(completed.left._tag, "StaleAttempt", context)
            assert.deepStrictEqual(reaped.left_alone, [], context)
            assert.deepStrictEqual(
              reaped.reaped.map((r) => [r.task_id, r.reason, r.state]),
              [[receipt.task_id, "lease_expired", retry.max_attempts === 2 ? "queued" : "failed"]],
              context
            )
            assert.strictEqual(view.state, retry.max_attempts === 2 ? "queued" : "failed", context)
            assert.isNull(view.result, context)
            assert.strictEqual(first.outcome, "failed", context)
            assert.strictEqual(first.error?.tag, "worker_lost", context)
            assert.strictEqual(first.late?.outcome, "complete", context)
            assert.deepStrictEqual(first.late?.result, result, context)
          }
          assert.strictEqual(view.attempts.length, 1, context)
        }
        assert.strictEqual(tally.completed + tally.reaped, Iterations)
        // Both sides won some races (about half each here): the race was real both ways.
        assert.isAbove(tally.completed, 0, JSON.stringify(tally))
        assert.isAbove(tally.reaped, 0, JSON.stringify(tally))
      }).pipe(
        quiet,
        Effect.provide(
          Layer.unwrapScoped(
            Effect.map(tempDir, (root) =>
              fileTaskStoreLayer({ root }).pipe(
                Layer.provideMerge(Host.layerTest(here)),
                Layer.provide(nodeContextLayer)
              )
            )
          )
        )
      ),
    120_000
  )
})

const chaos = useChaos()

const LateText = Schema.parseJson(Schema.Struct({ task_id: Schema.String, attempt: Schema.Int }))
const ClaudeResult = Schema.Struct({ text: Schema.String })
/** The `{task_id, attempt}` that the scripted fake answered, from a claude result. */
const answerOf = (result: unknown) =>
  Schema.decodeUnknownSync(LateText)(Schema.decodeUnknownSync(ClaudeResult)(result).text)

describe("stale fence, real processes (10b)", () => {
  it("worker A stopped past its lease loses the task to B; B's result stands, both side effects are recorded", async () => {
    const box = chaos()
    const [receipt] = await box.submit([{ id: "fenced", payload: scriptedPayload({ sleep_ms: 1_000 }) }])
    if (receipt === undefined) throw new Error("no receipt")
    const taskId = receipt.task_id
    // The policy is stamped by A's claim, and B's reap applies it: two attempts, a short backoff.
    const common = ["--watch", "--max-attempts", "2", "--retry-backoff", "200ms", "--poll", "500ms"]
    const a = box.startWorker("A", [...common, "--lease", "2s", "--worker-id", "worker-A"])
    await waitUntil(
      "A's provider to start attempt 1",
      () => (effectsOf(box.effects(), taskId).includes("start:1") ? true : undefined),
      60_000,
      () => logsOf(a)
    )

    // Stop A: its pid only, so its provider, which leads its own process group, runs on and
    // does its work (a reaper would stop it if it still ran; here it has finished by then).
    await stopOutside(a.pid, path.join(box.root, "locks", taskId))
    const aLease = box.record(taskId)?.lease
    assert.strictEqual(aLease?.worker_id, "worker-A")
    await waitUntil(
      "A's provider to finish attempt 1 while A is stopped",
      () => (effectsOf(box.effects(), taskId).includes("done:1") ? true : undefined),
      30_000
    )
    await waitUntil(
      "A's lease to expire",
      () => (Date.parse(box.record(taskId)?.lease?.expires_at ?? "") < Date.now() ? true : undefined),
      10_000
    )
    assert.strictEqual(processState(a.pid), "T", "A is still stopped")
    assert.strictEqual(box.record(taskId)?.state, "running", "nobody has touched the task yet")

    const b = box.startWorker("B", [...common, "--lease", "10s", "--worker-id", "worker-B"])
    const completed = await waitUntil(
      "B to complete attempt 2",
      () => {
        const record = box.record(taskId)
        return record?.state === "complete" ? record : undefined
      },
      60_000,
      () => logsOf(a, b)
    )
    assert.strictEqual(completed.attempt, 2)
    assert.strictEqual(processState(a.pid), "T", "A was stopped all along")

    continueProcess(a.pid)
    // A wakes up and ends its attempt 1 as stale, whichever it noticed first: the lost lease
    // or its provider's answer.
    await waitUntil(
      "A to end attempt 1",
      () =>
        a
          .events()
          .some((event) => event.event === "finished" && event.task_id === taskId && event.attempt === 1)
          ? true
          : undefined,
      30_000,
      () => logsOf(a, b)
    )
    const aEnd = a.events().find((event) => event.event === "finished" && event.attempt === 1)
    assert.strictEqual(aEnd?.outcome, "stale", logsOf(a))

    terminate(a.pid)
    terminate(b.pid)
    const [aExit, bExit] = await within("both workers to stop", Promise.all([a.exited, b.exited]), 30_000)
    assert.deepStrictEqual(aExit, { code: 0, signal: null }, logsOf(a))
    assert.deepStrictEqual(bExit, { code: 0, signal: null }, logsOf(b))
    const aSummary = a.summary()
    const bSummary = b.summary()
    assert.strictEqual(aSummary.finished, 0, "A finished nothing")
    assert.strictEqual(bSummary.reaped, 1, "B reaped A's attempt")
    assert.strictEqual(bSummary.finished, 1, "B completed attempt 2")

    const record = box.record(taskId)
    if (record === undefined) throw new Error("no record")
    assert.strictEqual(record.state, "complete")
    assert.strictEqual(record.attempt, 2)
    assert.deepStrictEqual(answerOf(record.result), { task_id: taskId, attempt: 2 }, "B's result stands")
    assert.strictEqual(record.attempts.length, 2)
    const [first, second] = record.attempts
    assert.strictEqual(first?.worker_id, "worker-A")
    assert.strictEqual(first?.outcome, "failed")
    assert.strictEqual(first?.error?.tag, "worker_lost")
    assert.strictEqual(first?.error?.retryable, true)
    assert.strictEqual(second?.worker_id, "worker-B")
    assert.strictEqual(second?.outcome, "complete")
    assert.isUndefined(second?.late)
    // A may have stopped its provider first (no late), but what it kept is its own answer.
    if (first?.late !== undefined) {
      assert.strictEqual(first.late.outcome, "complete")
      assert.deepStrictEqual(answerOf(first.late.result), { task_id: taskId, attempt: 1 })
    }
    assert.sameMembers(
      [...effectsOf(box.effects(), taskId)],
      ["start:1", "done:1", "start:2", "done:2"],
      "both attempts ran to their end, and no third"
    )
  }, 150_000)
})
