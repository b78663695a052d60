/**
 * The watching worker (src/worker/watch.ts), in-process on the memory store under the
 * TestClock: concurrency and per-provider caps, wake-ups, retry backoff, periodic reaping,
 * graceful and forced shutdown through `Shutdown.layerManual`, and what it tells its operator
 * (JSON events, the tty status line).
 *
 * The clock only moves when a test moves it, so "woken before the poll" means "with no time
 * passing at all". Waits for background fibers are bounded in real time (`eventually`).
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import {
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Ref,
  Schedule,
  Schema,
  TestClock,
  TestServices
} from "effect"
import { ProviderFailed, ProviderTimeout, StorageError } from "../../src/domain/errors.js"
import { ClientRequestId, TaskId } from "../../src/domain/ids.js"
import { providerOfPayload } from "../../src/domain/provider.js"
import type { JsonObject, Receipt, RetryPolicy } from "../../src/domain/Task.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import type { ProviderError, ProviderResult, ProviderTask } from "../../src/services/Provider.js"
import { Shutdown } from "../../src/services/Shutdown.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape, WorkerRegistry } from "../../src/services/TaskStore.js"
import { isoTime } from "../../src/domain/time.js"
import { Version } from "../../src/version.js"
import { presenceAt } from "../support/presence.js"
import type { LogFormat, WorkerStatus } from "../../src/worker/events.js"
import { describeEvent, describeStatus, makeWorkerOutput } from "../../src/worker/events.js"
import { WorkerOutput } from "../../src/services/WorkerOutput.js"
import type { WatchOptions, WatchSummary } from "../../src/worker/watch.js"
import { runWatch } from "../../src/worker/watch.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

type HostOptions = Parameters<typeof Host.layerTest>[0]
type Run = (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>

const twoAttempts: RetryPolicy = { max_attempts: 2, backoff_initial_ms: 1_000, backoff_max_ms: 1_000 }
const defaults: WatchOptions = {
  workerId: "watcher",
  leaseMillis: 60_000,
  retry: twoAttempts,
  concurrency: 2,
  maxPerProvider: new Map(),
  pollMillis: 60_000,
  graceMillis: 30_000,
  cancelPollMillis: 60_000,
  heartbeatMillis: 10_000
}
const ClearLine = "\r\u001b[2K"
const taskT = TaskId.make("a".repeat(64))
const taskR = TaskId.make("b".repeat(64))

// Every event line, decoded strictly: the fields of src/worker/events.ts and `time`, nothing else.
const Time = Schema.String.pipe(Schema.pattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/))
const Count = Schema.Int.pipe(Schema.nonNegative())
const EventLine = Schema.Union(
  Schema.Struct({
    time: Time,
    event: Schema.Literal("started"),
    worker_id: Schema.String,
    pid: Schema.Int,
    concurrency: Count,
    max_per_provider: Schema.Record({ key: Schema.String, value: Count }),
    max_attempts: Count
  }),
  Schema.Struct({
    time: Time,
    event: Schema.Literal("claimed"),
    task_id: Schema.String,
    attempt: Count,
    provider: Schema.String
  }),
  Schema.Struct({
    time: Time,
    event: Schema.Literal("finished"),
    task_id: Schema.String,
    attempt: Count,
    provider: Schema.String,
    outcome: Schema.Literal("complete", "failed", "cancelled", "stale"),
    duration_ms: Schema.Number.pipe(Schema.nonNegative()),
    error: Schema.optional(
      Schema.Struct({ tag: Schema.String, message: Schema.String, retryable: Schema.Boolean })
    ),
    requeued: Schema.optional(Schema.Boolean)
  }),
  Schema.Struct({
    time: Time,
    event: Schema.Literal("reaped"),
    task_id: Schema.String,
    attempt: Count,
    reason: Schema.Literal("lease_expired", "owner_dead", "owner_rebooted"),
    now: Schema.Literal("queued", "failed", "cancelled")
  }),
  Schema.Struct({
    time: Time,
    event: Schema.Literal("released"),
    task_id: Schema.String,
    attempt: Count,
    now: Schema.String
  }),
  Schema.Struct({
    time: Time,
    event: Schema.Literal("stopping"),
    reason: Schema.String,
    running: Count,
    grace_ms: Schema.Number
  }),
  Schema.Struct({ time: Time, event: Schema.Literal("storage_error"), message: Schema.String }),
  Schema.Struct({ time: Time, event: Schema.Literal("heartbeat_failed"), message: Schema.String }),
  Schema.Struct({ time: Time, event: Schema.Literal("heartbeat_restored") }),
  Schema.Struct({ time: Time, event: Schema.Literal("log"), level: Schema.String, message: Schema.String }),
  Schema.Struct({
    time: Time,
    event: Schema.Literal("stopped"),
    reason: Schema.String,
    finished: Count,
    failed: Count,
    released: Count
  })
)
type EventLine = typeof EventLine.Type
const decodeLine = Schema.decodeUnknownEither(Schema.parseJson(EventLine), { onExcessProperty: "error" })

/** Poll `check` until it holds, for at most 10 s of real time whatever the TestClock says. */
const eventually = <E, R>(what: string, check: Effect.Effect<boolean, E, R>) =>
  check.pipe(
    Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced("5 millis") }),
    Effect.timeout("10 seconds"),
    Effect.catchTag("TimeoutException", () => Effect.dieMessage(`timed out waiting for ${what}`)),
    TestServices.provideLive,
    Effect.asVoid
  )

const joinWithin = <A, E>(fiber: Fiber.Fiber<A, E>, what: string) =>
  Fiber.join(fiber).pipe(
    Effect.timeout("10 seconds"),
    Effect.catchTag("TimeoutException", () => Effect.dieMessage(`${what} did not end within 10 s`)),
    TestServices.provideLive
  )

interface WorldOptions {
  /** What a provider run does once the gate is open (default: a result). */
  readonly script?: Run
  /** Runs wait for `openGate` (default: open from the start). */
  readonly gated?: boolean
  /** The identity the store stamps on claims (default: the worker's host). */
  readonly storeHost?: HostOptions
  readonly host?: HostOptions
  readonly format?: LogFormat
  /** Wraps the memory store's worker registry (to make it fail, say). */
  readonly registry?: (inner: WorkerRegistry) => WorkerRegistry
  /** Wraps the memory store itself. */
  readonly wrap?: (inner: TaskStoreShape) => TaskStoreShape
}

/**
 * A memory store, a scripted provider that counts its concurrent runs (in total and by the
 * payload's provider name), a manual Shutdown, and the worker's output captured: events as
 * text, and every status the loop reports (one per look at the queue).
 */
const makeWorld = (options: WorldOptions = {}) =>
  Effect.gen(function* () {
    const host: HostOptions = options.host ?? { pid: 100, hostname: "here", bootId: "boot-1" }
    const gate = yield* Deferred.make<void>()
    if (options.gated !== true) yield* Deferred.succeed(gate, undefined)
    const active = yield* Ref.make<ReadonlyMap<string, number>>(new Map())
    const peak = yield* Ref.make<{
      readonly total: number
      readonly byProvider: ReadonlyMap<string, number>
    }>({ total: 0, byProvider: new Map() })
    const calls = yield* Ref.make<ReadonlyArray<ProviderTask>>([])
    const interrupted = yield* Ref.make<ReadonlyArray<TaskId>>([])
    const text = yield* Ref.make("")
    const statuses = yield* Ref.make<ReadonlyArray<WorkerStatus>>([])

    const total = (map: ReadonlyMap<string, number>) => [...map.values()].reduce((a, b) => a + b, 0)
    const enter = (name: string, task: ProviderTask) =>
      Effect.gen(function* () {
        yield* Ref.update(calls, (all) => [...all, task])
        const now = yield* Ref.updateAndGet(active, (map) => new Map(map).set(name, (map.get(name) ?? 0) + 1))
        yield* Ref.update(peak, (p) => ({
          total: Math.max(p.total, total(now)),
          byProvider: new Map(p.byProvider).set(
            name,
            Math.max(p.byProvider.get(name) ?? 0, now.get(name) ?? 0)
          )
        }))
      })
    const leave = (name: string) =>
      Ref.update(active, (map) => new Map(map).set(name, (map.get(name) ?? 1) - 1))
    const script: Run = options.script ?? ((task) => Effect.succeed({ result: { ran: task.taskId } }))
    const run: Run = (task) => {
      const name = providerOfPayload(task.payload)
      return Effect.acquireUseRelease(
        enter(name, task),
        () =>
          Deferred.await(gate).pipe(
            Effect.zipRight(script(task)),
            Effect.onInterrupt(() => Ref.update(interrupted, (all) => [...all, task.taskId]))
          ),
        () => leave(name)
      )
    }

    const base = yield* makeWorkerOutput(options.format ?? "json", (chunk) =>
      Ref.update(text, (all) => all + chunk)
    )
    const output = WorkerOutput.of({
      event: base.event,
      status: (status) =>
        Effect.zipRight(
          Ref.update(statuses, (all) => [...all, status]),
          base.status(status)
        )
    })
    const context = yield* Layer.build(
      Layer.mergeAll(
        memoryTaskStoreLayer().pipe(
          Layer.provide(Host.layerTest(options.storeHost ?? host)),
          Layer.map((built) => {
            const inner = Context.get(built, TaskStore)
            const registry = options.registry ?? ((same: WorkerRegistry) => same)
            const wrap = options.wrap ?? ((same: TaskStoreShape) => same)
            return Context.make(TaskStore, wrap({ ...inner, workers: registry(inner.workers) }))
          })
        ),
        Provider.layerTest(run),
        Shutdown.layerManual,
        Layer.succeed(WorkerOutput, output),
        Host.layerTest(host)
      )
    )
    const store = Context.get(context, TaskStore)
    const shutdown = Context.get(context, Shutdown)

    const events = Effect.flatMap(Ref.get(text), (all) =>
      Effect.forEach(
        all.split("\n").filter((line) => line !== ""),
        (line) => Effect.orDieWith(decodeLine(line), () => `not an event line: ${JSON.stringify(line)}`)
      )
    )
    const eventsOf = <K extends EventLine["event"]>(kind: K) =>
      Effect.map(events, (all) => all.filter((e): e is Extract<EventLine, { event: K }> => e.event === kind))
    const countOf = (kind: EventLine["event"]) => Effect.map(eventsOf(kind), (all) => all.length)
    const looks = Effect.map(Ref.get(statuses), (all) => all.length)
    const running = Effect.map(Ref.get(active), total)

    /** Submit at the current time, then move the clock 1 ms, so submission order is fixed. */
    const submit = (name: string, payload: JsonObject = { name }) =>
      Effect.tap(store.submit({ clientRequestId: ClientRequestId.make(name), payload }), () =>
        TestClock.adjust(Duration.millis(1))
      )
    const start = (overrides: Partial<WatchOptions> = {}) =>
      Effect.fork(Effect.provide(runWatch({ ...defaults, ...overrides }), context))
    const read = (receipt: Receipt) => store.read(receipt.task_id, receipt.payload_sha256)

    return {
      store,
      shutdown,
      gate,
      peak,
      calls,
      interrupted,
      text,
      statuses,
      events,
      eventsOf,
      countOf,
      looks,
      running,
      submit,
      start,
      read,
      openGate: Deferred.succeed(gate, undefined)
    }
  })

type World = Effect.Effect.Success<ReturnType<typeof makeWorld>>

const stopWith = (world: World, fiber: Fiber.Fiber<WatchSummary, unknown>) =>
  Effect.zipRight(world.shutdown.signal("SIGTERM"), joinWithin(fiber, "the watch"))

const scoped = (name: string, body: () => Effect.Effect<void, unknown, Scope.Scope>) => it.scoped(name, body)

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
  scoped("a freed slot takes the next task of the last look without reading the queue again", () =>
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
      // One look finds the twenty; freed slots take the rest from it; one more look, once it is
      // used up, finds the queue empty. A look per freed slot would make about eleven.
      assert.isAtMost(yield* world.looks, 3)
      assert.sameMembers(
        (yield* world.eventsOf("claimed")).map((event) => event.task_id),
        receipts.map((receipt) => receipt.task_id),
        "each claimed once"
      )
      assert.strictEqual((yield* world.eventsOf("claimed")).length, 20)
      yield* stopWith(world, fiber)
    })
  )

  scoped("a task of the last look cancelled meanwhile is declined, not run", () =>
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
        { task_id: reaped?.task_id, attempt: reaped?.attempt, reason: reaped?.reason, now: reaped?.now },
        { task_id: receipt.task_id, attempt: 1, reason: "owner_dead", now: "queued" }
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
        released.map((e) => `${e.task_id}@${e.attempt}:${e.now}`),
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

describe("runWatch worker registry", () => {
  const entries = (world: World) => world.store.workers.list

  /**
   * Until `check` holds, move the clock `stepMillis` at a time (at most 10 steps). One step may
   * not do: the heartbeat fiber may not be asleep yet when the clock first moves.
   */
  const advanceUntil = <E, R>(what: string, stepMillis: number, check: Effect.Effect<boolean, E, R>) =>
    Effect.gen(function* () {
      for (let step = 0; step <= 10; step++) {
        const held = yield* check.pipe(
          Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced("5 millis") }),
          Effect.timeoutOption("300 millis"),
          TestServices.provideLive
        )
        if (Option.isSome(held)) return
        yield* TestClock.adjust(Duration.millis(stepMillis))
      }
      return yield* Effect.dieMessage(`${what}: not after 10 steps of ${stepMillis} ms`)
    })

  scoped(
    "an idle worker is listed from its start, renews its heartbeat, shows stopping in its grace, and is gone once stopped",
    () =>
      Effect.gen(function* () {
        const world = yield* makeWorld({ gated: true })
        const fiber = yield* world.start({ concurrency: 2, heartbeatMillis: 10_000 })
        yield* eventually(
          "the first heartbeat",
          Effect.map(entries(world), (all) => all.length === 1)
        )
        const [first] = yield* entries(world)
        const { instance, ...described } = first ?? assert.fail("no entry")
        assert.match(instance, /^[0-9a-f]{32}$/)
        assert.deepStrictEqual(described, {
          worker_id: "watcher",
          hostname: "here",
          pid: 100,
          version: Version,
          status: "watching",
          started_at: isoTime(0),
          seen_at: isoTime(0),
          expires_at: isoTime(30_000),
          concurrency: 2,
          running: 0
        })

        // A task runs; the next heartbeat says so.
        yield* world.submit("one")
        yield* eventually(
          "one run",
          Effect.map(world.running, (n) => n === 1)
        )
        yield* advanceUntil(
          "the heartbeat after 10 s",
          10_000,
          Effect.map(entries(world), (all) => all[0]?.seen_at !== isoTime(0))
        )
        const [renewed] = yield* entries(world)
        const seen = Date.parse(renewed?.seen_at ?? "")
        assert.isAtLeast(seen, 10_000, "renewed by the timer, not before")
        assert.deepStrictEqual(
          [renewed?.instance, renewed?.running, renewed?.expires_at, renewed?.started_at],
          [instance, 1, isoTime(seen + 30_000), isoTime(0)]
        )

        // Stopping: said at once, and kept up while the attempt finishes.
        yield* world.shutdown.signal("SIGTERM")
        yield* eventually(
          "a stopping entry",
          Effect.map(entries(world), (all) => all[0]?.status === "stopping")
        )
        assert.strictEqual((yield* entries(world))[0]?.running, 1)
        yield* world.openGate
        yield* joinWithin(fiber, "the watch")
        assert.deepStrictEqual(yield* entries(world), [], "retired when it stopped")
      })
  )

  scoped("a watch interrupted from outside (no stop signal) still removes its entry", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld()
      const fiber = yield* world.start()
      yield* eventually(
        "the first heartbeat",
        Effect.map(entries(world), (all) => all.length === 1)
      )
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(yield* entries(world), [])
    })
  )

  scoped("a start prunes the entries of workers silent for over an hour, and keeps the rest", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld()
      yield* TestClock.adjust(Duration.hours(2))
      const silent = (digit: string, seenAt: number) =>
        presenceAt(digit, `killed-${digit}`, seenAt, { hostname: "elsewhere", pid: 7, concurrency: 1 })
      const old = silent("a", 30 * 60_000) // late since 00:30, pruned after 01:30
      const recent = silent("b", 90 * 60_000) // late since 01:30, kept until 02:30
      yield* world.store.workers.announce(old)
      yield* world.store.workers.announce(recent)
      const fiber = yield* world.start()
      yield* eventually(
        "the worker's own entry",
        Effect.map(entries(world), (all) => all.some((entry) => entry.worker_id === "watcher"))
      )
      assert.deepStrictEqual(
        (yield* entries(world)).map((entry) => entry.worker_id),
        ["killed-b", "watcher"]
      )
      yield* stopWith(world, fiber)
      assert.deepStrictEqual(yield* entries(world), [recent])
    })
  )

  /** Move the clock a second at a time until `fiber` ends; how many seconds it took (at most 30). */
  const secondsToEnd = (fiber: Fiber.Fiber<unknown, unknown>) =>
    Effect.gen(function* () {
      let seconds = 0
      while (Option.isNone(yield* Fiber.poll(fiber)) && seconds < 30) {
        yield* TestClock.adjust(Duration.millis(1_000))
        yield* Effect.sleep(Duration.millis(20)).pipe(TestServices.provideLive)
        seconds += 1
      }
      return seconds
    })

  /** A registry whose `announce` the test controls: counted, and failing or hanging on demand. */
  const controlled = Effect.gen(function* () {
    const mode = yield* Ref.make<"ok" | "fail" | "hang">("ok")
    const retireHangs = yield* Ref.make(false)
    const calls = yield* Ref.make(0)
    const refused = new StorageError({
      operation: "write",
      path: "/registry",
      reason: "disk full (injected)"
    })
    const registry = (inner: WorkerRegistry): WorkerRegistry => ({
      ...inner,
      announce: (presence) =>
        Effect.zipRight(
          Ref.update(calls, (n) => n + 1),
          Effect.flatMap(Ref.get(mode), (now) =>
            now === "ok" ? inner.announce(presence) : now === "fail" ? Effect.fail(refused) : Effect.never
          )
        ),
      retire: (instance) =>
        Effect.flatMap(Ref.get(retireHangs), (hangs) => (hangs ? Effect.never : inner.retire(instance)))
    })
    /** Heartbeats come every 10 s in these tests. */
    const callsReach = (what: string, n: number) =>
      advanceUntil(
        what,
        10_000,
        Effect.map(Ref.get(calls), (k) => k >= n)
      )
    return { mode, retireHangs, calls, refused, registry, callsReach }
  })

  scoped(
    "a registry that fails: heartbeat_failed once, not at each heartbeat; tasks still run; heartbeat_restored after",
    () =>
      Effect.gen(function* () {
        const control = yield* controlled
        yield* Ref.set(control.mode, "fail")
        const world = yield* makeWorld({ registry: control.registry })
        const receipt = yield* world.submit("runs anyway")
        const fiber = yield* world.start({ heartbeatMillis: 10_000 })
        yield* eventually(
          "the task complete",
          Effect.map(world.read(receipt), (view) => view.state === "complete")
        )
        yield* control.callsReach("three heartbeats", 3)
        const failed = yield* world.eventsOf("heartbeat_failed")
        assert.deepStrictEqual(
          failed.map((event) => event.message),
          [control.refused.message],
          "said once for three failed heartbeats"
        )
        yield* Ref.set(control.mode, "ok")
        yield* advanceUntil(
          "heartbeat_restored",
          10_000,
          Effect.map(world.countOf("heartbeat_restored"), (n) => n === 1)
        )
        assert.deepStrictEqual(
          (yield* entries(world)).map((entry) => entry.worker_id),
          ["watcher"]
        )
        yield* stopWith(world, fiber)
        assert.deepStrictEqual(yield* entries(world), [])
      })
  )

  scoped("a registry that hangs never holds up the work, nor a stop", () =>
    Effect.gen(function* () {
      const control = yield* controlled
      const world = yield* makeWorld({ registry: control.registry })
      const fiber = yield* world.start({ heartbeatMillis: 10_000 })
      yield* control.callsReach("the first heartbeat", 1)
      yield* Ref.set(control.mode, "hang")
      yield* control.callsReach("a heartbeat that hangs", 2)
      // Work goes on meanwhile.
      const receipt = yield* world.submit("during the hang")
      yield* eventually(
        "the task complete",
        Effect.map(world.read(receipt), (view) => view.state === "complete")
      )
      // The hung heartbeat counts as failed once its interval has passed.
      yield* advanceUntil(
        "heartbeat_failed",
        10_000,
        Effect.map(world.countOf("heartbeat_failed"), (n) => n === 1)
      )
      // A stop: the stopping heartbeat hangs too, yet the watch ends once the bounded waits pass.
      yield* world.shutdown.signal("SIGTERM")
      yield* eventually(
        "the stopped event",
        Effect.map(world.countOf("stopped"), (n) => n === 1)
      )
      const seconds = yield* secondsToEnd(fiber)
      const summary = yield* joinWithin(fiber, "the watch with a hung registry")
      assert.strictEqual(summary.reason, "SIGTERM")
      assert.isAtMost(seconds, 3, "ended within the 2 s the heartbeat in flight may take")
      assert.deepStrictEqual(yield* entries(world), [], "the removal still went through")
    })
  )

  scoped("a removal that hangs too: the watch still ends within both bounds, and says so", () =>
    Effect.gen(function* () {
      const control = yield* controlled
      const world = yield* makeWorld({ registry: control.registry })
      const fiber = yield* world.start({ heartbeatMillis: 10_000 })
      yield* control.callsReach("the first heartbeat", 1)
      yield* Ref.set(control.mode, "hang")
      yield* Ref.set(control.retireHangs, true)
      yield* world.shutdown.signal("SIGTERM")
      yield* eventually(
        "the stopped event",
        Effect.map(world.countOf("stopped"), (n) => n === 1)
      )
      const seconds = yield* secondsToEnd(fiber)
      yield* joinWithin(fiber, "the watch with a hung removal")
      assert.isAtMost(seconds, 5, "2 s for the heartbeat in flight, 2 s for the removal")
      const logs = yield* world.eventsOf("log")
      assert.isTrue(
        logs.some((event) => event.message.startsWith("worker registry entry not removed:")),
        "the removal that did not happen is said"
      )
    })
  )

  scoped("after a storage error no heartbeat is written; the entry is still removed", () =>
    Effect.gen(function* () {
      const control = yield* controlled
      const broken = new StorageError({ operation: "fsync", path: "/tasks", reason: "EIO (injected)" })
      const world = yield* makeWorld({
        gated: true,
        registry: control.registry,
        wrap: (store) => ({
          ...store,
          complete: () => Effect.fail(broken)
        })
      })
      yield* world.submit("fails to record")
      const fiber = yield* world.start({ heartbeatMillis: 1_000, graceMillis: 60_000 })
      yield* eventually(
        "one run",
        Effect.map(world.running, (n) => n === 1)
      )
      yield* world.openGate
      yield* eventually(
        "the storage_error event",
        Effect.map(world.countOf("storage_error"), (n) => n === 1)
      )
      const before = yield* Ref.get(control.calls)
      for (let second = 0; second < 5; second++) {
        yield* TestClock.adjust(Duration.millis(1_000))
        yield* Effect.sleep(Duration.millis(5)).pipe(TestServices.provideLive)
      }
      assert.strictEqual(yield* Ref.get(control.calls), before, "heartbeats after the storage error")
      const exit = yield* Fiber.await(fiber).pipe(Effect.timeout("10 seconds"), TestServices.provideLive)
      assert.isTrue(Exit.isFailure(exit), "the watch fails with the storage error")
      assert.deepStrictEqual(yield* entries(world), [])
    })
  )
})

describe("runWatch output", () => {
  scoped("JSON: one object per line with exactly the fields of its event", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({
        script: (task) => {
          const kind = task.payload["kind"]
          if (kind === "flaky") return Effect.fail(new ProviderTimeout({ provider: "scripted", millis: 5 }))
          if (kind === "fatal")
            return Effect.fail(
              new ProviderFailed({ provider: "scripted", reason: "refused", retryable: false })
            )
          return Effect.succeed({ result: "ok" })
        }
      })
      const ok = yield* world.submit("ok", { kind: "ok" })
      const flaky = yield* world.submit("flaky", { kind: "flaky" })
      const fatal = yield* world.submit("fatal", { kind: "fatal" })
      const fiber = yield* world.start({ concurrency: 1 })
      yield* eventually(
        "three finished attempts",
        Effect.map(world.countOf("finished"), (n) => n === 3)
      )
      yield* stopWith(world, fiber)

      const text = yield* Ref.get(world.text)
      assert.isTrue(text.endsWith("\n"))
      assert.notInclude(text, ClearLine)
      const lines = text.slice(0, -1).split("\n")
      for (const line of lines)
        assert.isTrue(decodeLine(line)._tag === "Right", `not an event line: ${JSON.stringify(line)}`)
      const events = yield* world.events
      assert.deepStrictEqual(
        events.map((e) => e.event),
        [
          "started",
          "claimed",
          "finished",
          "claimed",
          "finished",
          "claimed",
          "finished",
          "stopping",
          "stopped"
        ]
      )
      const [started] = yield* world.eventsOf("started")
      assert.deepStrictEqual(started, {
        time: "1970-01-01T00:00:00.003Z",
        event: "started",
        worker_id: "watcher",
        pid: 100,
        concurrency: 1,
        max_per_provider: {},
        max_attempts: 2
      })
      const finished = yield* world.eventsOf("finished")
      assert.deepStrictEqual(
        finished.map(({ duration_ms: _ms, time: _time, ...rest }) => rest),
        [
          { event: "finished", task_id: ok.task_id, attempt: 1, provider: "fake-echo", outcome: "complete" },
          {
            event: "finished",
            task_id: flaky.task_id,
            attempt: 1,
            provider: "fake-echo",
            outcome: "failed",
            error: {
              tag: "ProviderTimeout",
              message: "scripted did not finish within 5 ms; its processes were stopped",
              retryable: true
            },
            requeued: true
          },
          {
            event: "finished",
            task_id: fatal.task_id,
            attempt: 1,
            provider: "fake-echo",
            outcome: "failed",
            error: { tag: "ProviderFailed", message: "scripted: refused", retryable: false },
            requeued: false
          }
        ]
      )
      const [stopped] = yield* world.eventsOf("stopped")
      assert.deepStrictEqual(
        [stopped?.reason, stopped?.finished, stopped?.failed, stopped?.released],
        ["SIGTERM", 1, 1, 0]
      )
    })
  )

  it.effect("tty: events go above a status line that is redrawn only when it changes", () =>
    Effect.gen(function* () {
      const written = yield* Ref.make<ReadonlyArray<string>>([])
      const tty = yield* makeWorkerOutput("tty", (chunk) => Ref.update(written, (all) => [...all, chunk]))
      const status: WorkerStatus = { running: 1, queued: 2, finished: 0, failed: 0 }
      const line = "running 1 · queued 2 · finished 0 · failed 0"
      assert.strictEqual(describeStatus(status), line)

      yield* tty.status(status)
      yield* tty.status(status)
      yield* tty.event({ event: "claimed", task_id: taskT, attempt: 1, provider: "fake-echo" })
      yield* tty.status({ ...status, running: 0, finished: 1 })
      yield* tty.event({ event: "stopped", reason: "SIGTERM", finished: 1, failed: 0, released: 0 })
      const time = "1970-01-01T00:00:00.000Z"
      assert.deepStrictEqual(yield* Ref.get(written), [
        `${ClearLine}${line}`,
        `${ClearLine}${time} claimed ${taskT} attempt 1 (fake-echo)\n${line}`,
        `${ClearLine}running 0 · queued 2 · finished 1 · failed 0`,
        // After the last event the shell's prompt comes next: no status line below it.
        `${ClearLine}${time} stopped (SIGTERM): 1 finished, 0 failed, 0 released\n`
      ])

      const plain = yield* Ref.make<ReadonlyArray<string>>([])
      const textOutput = yield* makeWorkerOutput("text", (chunk) =>
        Ref.update(plain, (all) => [...all, chunk])
      )
      const reaped = {
        event: "reaped",
        task_id: taskR,
        attempt: 2,
        reason: "owner_dead",
        now: "queued"
      } as const
      yield* textOutput.status(status)
      yield* textOutput.event(reaped)
      assert.deepStrictEqual(yield* Ref.get(plain), [`${time} ${describeEvent(reaped)}\n`])
      assert.strictEqual(describeEvent(reaped), `reaped ${taskR} attempt 2 (owner_dead): now queued`)
    })
  )

  scoped("tty: a watching worker keeps the status line current and ends on its last event", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ format: "tty" })
      yield* world.submit("one")
      const fiber = yield* world.start()
      // Events are not JSON here: wait on the statuses the loop reports instead.
      yield* eventually(
        "a look after the task finished",
        Effect.map(Ref.get(world.statuses), (all) => all.some((s) => s.finished === 1))
      )
      yield* stopWith(world, fiber)
      const text = yield* Ref.get(world.text)
      assert.include(text, `${ClearLine}running 1 · queued 1 · finished 0 · failed 0`)
      assert.include(text, `${ClearLine}running 0 · queued 0 · finished 1 · failed 0`)
      // The last write is the stopped event on a cleared line, with no status line below it.
      const last = text.slice(text.lastIndexOf(ClearLine) + ClearLine.length)
      assert.match(last, /^\S+ stopped \(SIGTERM\): 1 finished, 0 failed, 0 released\n$/)
    })
  )
})
