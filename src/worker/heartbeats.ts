/**
 * A watching worker's entry in the store's worker registry (`TaskStore.workers`): announced at
 * the start and every `heartbeatMillis` after by one fiber, and removed when the worker's scope
 * closes, however it closes. Every write goes through that fiber, so they never overtake each
 * other (a late `watching` cannot follow `stopping`), and none blocks the worker's work: a write
 * is bounded in time, one that fails is reported once and the worker carries on, and the end
 * waits for the registry at most twice `RetireMillis`.
 */
import { Clock, Deferred, Effect, Fiber, Queue, Ref } from "effect"
import type { Scope } from "effect"
import { StorageError } from "../domain/errors.js"
import { isoTime } from "../domain/time.js"
import type { WorkerStatus } from "../domain/worker.js"
import { LateWorkerKeptMillis } from "../domain/worker.js"
import { Host } from "../services/Host.js"
import { TaskStore } from "../services/TaskStore.js"
import { Version } from "../version.js"
import { WorkerOutput } from "../services/WorkerOutput.js"

export interface HeartbeatOptions {
  readonly workerId: string
  readonly concurrency: number
  readonly heartbeatMillis: number
  /** How many attempts the worker runs now. */
  readonly running: Effect.Effect<number>
}

export interface Heartbeats {
  /** Announce `stopping` at once, from the heartbeat fiber; does not wait for the write. */
  readonly stopping: Effect.Effect<void>
  /** Start no more writes: the store failed, and is written no more. The entry is still removed. */
  readonly silence: Effect.Effect<void>
}

/** A worker whose heartbeat is this many intervals old counts as late. */
export const HeartbeatsMissed = 3

/**
 * How long the end of a watch waits for the registry: for a heartbeat in flight to finish, then
 * for the entry's removal. A store that hangs (a database that is down) delays a stop by at most
 * twice this.
 */
export const RetireMillis = 2_000

const timedOut = (operation: string, millis: number) => () =>
  new StorageError({ operation, path: "worker registry", reason: `no answer within ${millis} ms` })

export const startHeartbeats = (
  options: HeartbeatOptions
): Effect.Effect<Heartbeats, never, Scope.Scope | TaskStore | Host | WorkerOutput> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const host = yield* Host
    const output = yield* WorkerOutput
    const instance = yield* host.token
    const startedAt = isoTime(yield* Clock.currentTimeMillis)
    const status = yield* Ref.make<WorkerStatus>("watching")
    const silenced = yield* Ref.make(false)
    const failing = yield* Ref.make(false)
    const beatNow = yield* Queue.sliding<void>(1)
    const done = yield* Deferred.make<void>()
    const warn = (message: string) => output.event({ event: "log", level: "WARN", message })

    const announce = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      yield* store.workers.announce({
        instance,
        worker_id: options.workerId,
        hostname: host.hostname,
        pid: host.pid,
        version: Version,
        status: yield* Ref.get(status),
        started_at: startedAt,
        seen_at: isoTime(now),
        expires_at: isoTime(now + HeartbeatsMissed * options.heartbeatMillis),
        concurrency: options.concurrency,
        running: yield* options.running
      })
    }).pipe(
      Effect.timeoutFail({
        duration: options.heartbeatMillis,
        onTimeout: timedOut("announce", options.heartbeatMillis)
      }),
      // Said when it starts failing and when it works again, not at every heartbeat.
      Effect.matchEffect({
        onFailure: (error) =>
          Effect.whenEffect(
            output.event({ event: "heartbeat_failed", message: error.message }),
            Effect.map(Ref.getAndSet(failing, true), (was) => !was)
          ),
        onSuccess: () =>
          Effect.whenEffect(output.event({ event: "heartbeat_restored" }), Ref.getAndSet(failing, false))
      })
    )
    const beat = Effect.unlessEffect(announce, Ref.get(silenced))

    // Finalizers run last added first: this one after the heartbeat fiber has stopped. A finalizer
    // cannot be interrupted, so the removal is made interruptible for its timeout to cut it short.
    yield* Effect.addFinalizer(() =>
      Effect.interruptible(store.workers.retire(instance)).pipe(
        Effect.timeoutFail({ duration: RetireMillis, onTimeout: timedOut("retire", RetireMillis) }),
        Effect.catchAll((error) => warn(`worker registry entry not removed: ${error.message}`))
      )
    )
    // Entries of workers silent for long (killed, their machine gone) are dropped at a start.
    const prune = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      store.workers.prune(now - LateWorkerKeptMillis).pipe(
        Effect.timeoutFail({ duration: RetireMillis, onTimeout: timedOut("prune", RetireMillis) }),
        Effect.catchAll((error) => warn(`worker registry not pruned: ${error.message}`))
      )
    )
    const fiber = yield* Effect.forkScoped(
      Effect.gen(function* () {
        yield* prune
        while (true) {
          yield* beat
          const next = yield* Effect.raceFirst(
            Effect.as(Deferred.await(done), "done" as const),
            Effect.as(
              Effect.race(Effect.sleep(options.heartbeatMillis), Queue.take(beatNow)),
              "beat" as const
            )
          )
          if (next === "done") return
        }
      })
    )
    // A write in flight may finish, for a bounded time, so that it does not land after the
    // removal; one cut off by the bound may still land (a database that answers late), and the
    // entry then shows as late until a start prunes it.
    yield* Effect.addFinalizer(() =>
      Deferred.succeed(done, undefined).pipe(
        Effect.zipRight(Effect.timeoutOption(Effect.interruptible(Fiber.await(fiber)), RetireMillis)),
        Effect.zipRight(Fiber.interrupt(fiber))
      )
    )

    return {
      stopping: Effect.zipRight(Ref.set(status, "stopping"), Queue.offer(beatNow, undefined)),
      silence: Ref.set(silenced, true)
    }
  })
