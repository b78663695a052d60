/**
 * The world the watching worker's tests run in (test/worker/watch.test.ts, heartbeats.test.ts,
 * events.test.ts): the memory store under the TestClock, a scripted provider that counts its
 * concurrent runs, a manual Shutdown, and the worker's output captured and decoded strictly.
 *
 * The clock only moves when a test moves it, so "woken before the poll" means "with no time
 * passing at all". Waits for background fibers are bounded in real time (`eventually`).
 */
import { it } from "@effect/vitest"
import type { Scope } from "effect"
import {
  Context,
  Deferred,
  Duration,
  Effect,
  Fiber,
  Layer,
  Ref,
  Schedule,
  Schema,
  TestClock,
  TestServices
} from "effect"
import { ClientRequestId, TaskId } from "../../src/domain/ids.js"
import { providerOfPayload } from "../../src/domain/provider.js"
import type { JsonObject, Receipt, RetryPolicy } from "../../src/domain/Task.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import type { ProviderError, ProviderResult, ProviderTask } from "../../src/services/Provider.js"
import { Shutdown } from "../../src/services/Shutdown.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape, WorkerRegistry } from "../../src/services/TaskStore.js"
import type { LogFormat, WorkerStatus } from "../../src/worker/events.js"
import { makeWorkerOutput } from "../../src/worker/events.js"
import { WorkerOutput } from "../../src/services/WorkerOutput.js"
import type { WatchOptions, WatchSummary } from "../../src/worker/watch.js"
import { runWatch } from "../../src/worker/watch.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

export type HostOptions = Parameters<typeof Host.layerTest>[0]
export type Run = (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>

export const twoAttempts: RetryPolicy = { max_attempts: 2, backoff_initial_ms: 1_000, backoff_max_ms: 1_000 }
export const defaults: WatchOptions = {
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
export const ClearLine = "\r\u001b[2K"
export const taskT = TaskId.make("a".repeat(64))
export const taskR = TaskId.make("b".repeat(64))

// Every event line, decoded strictly: the fields of src/worker/events.ts and `time`, nothing else.
export const Time = Schema.String.pipe(Schema.pattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/))
export const Count = Schema.Int.pipe(Schema.nonNegative())
export const EventLine = Schema.Union(
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
    state: Schema.Literal("queued", "failed", "cancelled")
  }),
  Schema.Struct({
    time: Time,
    event: Schema.Literal("released"),
    task_id: Schema.String,
    attempt: Count,
    state: Schema.Literal("queued", "failed", "cancelled")
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
export type EventLine = typeof EventLine.Type
export const decodeLine = Schema.decodeUnknownEither(Schema.parseJson(EventLine), {
  onExcessProperty: "error"
})

/** Poll `check` until it holds, for at most 10 s of real time whatever the TestClock says. */
export const eventually = <E, R>(what: string, check: Effect.Effect<boolean, E, R>) =>
  check.pipe(
    Effect.repeat({ until: (ok) => ok, schedule: Schedule.spaced("5 millis") }),
    Effect.timeout("10 seconds"),
    Effect.catchTag("TimeoutException", () => Effect.dieMessage(`timed out waiting for ${what}`)),
    TestServices.provideLive,
    Effect.asVoid
  )

export const joinWithin = <A, E>(fiber: Fiber.Fiber<A, E>, what: string) =>
  Fiber.join(fiber).pipe(
    Effect.timeout("10 seconds"),
    Effect.catchTag("TimeoutException", () => Effect.dieMessage(`${what} did not end within 10 s`)),
    TestServices.provideLive
  )

export interface WorldOptions {
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
 * text, and every status the worker reports (after each claim and each attempt's end); `looks` counts its claims.
 */
export const makeWorld = (options: WorldOptions = {}) =>
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
    const claims = yield* Ref.make(0)

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
            // Every claim the worker asks for is counted; a read of the whole queue fails the test.
            const counted: TaskStoreShape = {
              ...inner,
              workers: registry(inner.workers),
              claimNext: (request) =>
                Effect.zipRight(
                  Ref.update(claims, (n) => n + 1),
                  inner.claimNext(request)
                ),
              live: Effect.die("a watching worker read the whole queue (TaskStore.live)")
            }
            return Context.make(TaskStore, wrap(counted))
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
    /** How many times the worker asked the store for work (`claimNext`). */
    const looks = Ref.get(claims)
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

export type World = Effect.Effect.Success<ReturnType<typeof makeWorld>>

export const stopWith = (world: World, fiber: Fiber.Fiber<WatchSummary, unknown>) =>
  Effect.zipRight(world.shutdown.signal("SIGTERM"), joinWithin(fiber, "the watch"))

export const scoped = (name: string, body: () => Effect.Effect<void, unknown, Scope.Scope>) =>
  it.scoped(name, body)
