/**
 * The watching worker's entry in the store's worker registry (src/worker/heartbeats.ts), as
 * `runWatch` keeps it: announced at the start, renewed, marked stopping, removed at the end,
 * and never in the way of the work when the registry fails or hangs.
 */
import { assert, describe } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Option, Ref, Schedule, TestClock, TestServices } from "effect"
import { StorageError } from "../../src/domain/errors.js"
import type { WorkerRegistry } from "../../src/services/TaskStore.js"
import { isoTime } from "../../src/domain/time.js"
import { Version } from "../../src/version.js"
import { presenceAt } from "../support/presence.js"
import { eventually, joinWithin, makeWorld, stopWith, scoped } from "../support/watchWorld.js"
import type { World } from "../support/watchWorld.js"

describe("the watching worker in the registry", () => {
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
