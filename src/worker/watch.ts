/**
 * The long-running worker (`relaykeep worker --watch`). It wakes on new submissions (the
 * store's `wakeups`, with a slow poll as a fallback and a timer for the first retry that comes
 * due), reaps orphans each time it looks at the queue, and runs up to `concurrency` attempts
 * at once within per-provider caps.
 *
 * Stopping: on the first SIGINT/SIGTERM it stops claiming, lets running attempts finish for up
 * to `graceMillis`, then stops their processes and gives their tasks back; a second signal
 * skips the wait. A storage error stops claiming in the same way (a failed fsync is not
 * retried: what the disk holds is no longer known) and the worker then fails with it.
 *
 * While it runs, the worker announces itself in the store's worker registry every
 * `heartbeatMillis` (`worker/heartbeats.ts`), and removes its entry when it stops, so that the
 * dashboard can show idle workers too. A heartbeat that cannot be written is reported and the
 * worker carries on: the registry is a view for people, and no task depends on it.
 */
import { Clock, Deferred, Effect, FiberSet, Option, Queue, Ref, Schema, Stream } from "effect"
import type { StorageError } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import { providerOfPayload } from "../domain/provider.js"
import type { RetryPolicy } from "../domain/Task.js"
import { timeMillis } from "../domain/Task.js"
import { Host } from "../services/Host.js"
import type { Provider } from "../services/Provider.js"
import { Shutdown } from "../services/Shutdown.js"
import type { ReadyTask } from "../services/TaskStore.js"
import { TaskStore } from "../services/TaskStore.js"
import { runAttempt } from "./attempt.js"
import { WorkerOutput } from "../services/WorkerOutput.js"
import { startHeartbeats } from "./heartbeats.js"
import { reapSnapshot } from "./reap.js"

export interface WatchOptions {
  readonly workerId: string
  readonly leaseMillis: number
  readonly retry: RetryPolicy
  /** Attempts running at once. */
  readonly concurrency: number
  /** At most this many attempts of a provider at once (providers not named: no cap but `concurrency`). */
  readonly maxPerProvider: ReadonlyMap<string, number>
  /** Look at the queue at least this often, whatever the wake-ups say. */
  readonly pollMillis: number
  /** How long running attempts may take to finish once a stop is requested. */
  readonly graceMillis: number
  readonly cancelPollMillis: number
  /** How often the worker writes its heartbeat to the store's worker registry. */
  readonly heartbeatMillis: number
}

export const DefaultConcurrency = 2
export const DefaultHeartbeatMillis = 5_000
export const DefaultPollMillis = 5_000
export const DefaultGraceMillis = 30_000

export const WatchSummary = Schema.Struct({
  /** Why the worker stopped: a signal's name, `forced` (a second signal), or `storage_error`. */
  reason: Schema.String,
  /** Attempts that ended complete. */
  finished: Schema.Int,
  /** Attempts that failed and left their task failed. */
  failed: Schema.Int,
  /** Attempts that failed and sent their task back to the queue for another attempt. */
  retried: Schema.Int,
  cancelled: Schema.Int,
  /** Attempts stopped at shutdown, their tasks given back. */
  released: Schema.Int,
  reaped: Schema.Int
})
export type WatchSummary = typeof WatchSummary.Type

type Stop =
  | { readonly _tag: "signal"; readonly signal: string }
  | { readonly _tag: "storage"; readonly error: StorageError }

/** Run until stopped. Fails with StorageError when the store failed under it. */
export const runWatch = (
  options: WatchOptions
): Effect.Effect<WatchSummary, StorageError, TaskStore | Provider | Host | Shutdown | WorkerOutput> =>
  Effect.scoped(
    Effect.gen(function* () {
      const store = yield* TaskStore
      const host = yield* Host
      const shutdown = yield* Shutdown
      const output = yield* WorkerOutput
      yield* shutdown.handle

      // Two reasons to look again: the queue may have new work (a wake-up from the store), or a
      // slot was freed (an attempt ended). Each holds at most one pending signal.
      const wake = yield* Queue.sliding<void>(1)
      const freed = yield* Queue.sliding<void>(1)
      yield* store.wakeups.pipe(
        Stream.runForEach(() => Queue.offer(wake, undefined)),
        Effect.forkScoped
      )
      const running = yield* Ref.make(new Map<TaskId, string>())
      const counts = yield* Ref.make({
        finished: 0,
        failed: 0,
        retried: 0,
        cancelled: 0,
        released: 0,
        reaped: 0
      })
      const queued = yield* Ref.make(0)
      const failure = yield* Deferred.make<StorageError>()

      const showStatus = Effect.gen(function* () {
        const done = yield* Ref.get(counts)
        yield* output.status({
          running: (yield* Ref.get(running)).size,
          queued: yield* Ref.get(queued),
          finished: done.finished,
          failed: done.failed
        })
      })

      yield* output.event({
        event: "started",
        worker_id: options.workerId,
        pid: host.pid,
        concurrency: options.concurrency,
        max_per_provider: Object.fromEntries(options.maxPerProvider),
        max_attempts: options.retry.max_attempts
      })
      // Started before the attempts' FiberSet, so that the entry is removed after they have ended.
      const heartbeats = yield* startHeartbeats({
        workerId: options.workerId,
        concurrency: options.concurrency,
        heartbeatMillis: options.heartbeatMillis,
        running: Effect.map(Ref.get(running), (map) => map.size)
      })
      const attempts = yield* FiberSet.make<void>()

      const storageFailed = (error: StorageError) =>
        Effect.all(
          [
            heartbeats.silence,
            output.event({ event: "storage_error", message: error.message }),
            Deferred.succeed(failure, error)
          ],
          { discard: true }
        )

      /** Whether one more attempt of `provider` fits now. */
      const roomFor = (current: ReadonlyMap<TaskId, string>, provider: string) => {
        const cap = options.maxPerProvider.get(provider)
        if (current.size >= options.concurrency) return false
        if (cap === undefined) return true
        let taken = 0
        for (const name of current.values()) if (name === provider) taken += 1
        return taken < cap
      }

      const unreserve = (taskId: TaskId) =>
        Ref.update(running, (map) => {
          const next = new Map(map)
          next.delete(taskId)
          return next
        })

      /**
       * Claim one task whose slot `fill` reserved, and start its attempt; uninterruptible, so no
       * claim is left without a runner. A declined or failed claim gives the slot back.
       */
      const start = ({ task_id: taskId, provider: reservedFor }: ReadyTask) =>
        Effect.uninterruptible(
          Effect.gen(function* () {
            const claimed = yield* store
              .claim(taskId, {
                workerId: options.workerId,
                leaseMillis: options.leaseMillis,
                retry: options.retry,
                // The slot was reserved for the provider the queue showed; a payload never changes.
                accept: (record) => providerOfPayload(record.payload) === reservedFor
              })
              .pipe(Effect.tapErrorCause(() => unreserve(taskId)))
            if (Option.isNone(claimed)) return yield* Effect.as(unreserve(taskId), false)
            const { lease, record } = claimed.value
            const provider = providerOfPayload(record.payload)
            yield* output.event({ event: "claimed", task_id: taskId, attempt: lease.attempt, provider })
            const attempt = runAttempt(claimed.value, {
              leaseMillis: options.leaseMillis,
              cancelPollMillis: options.cancelPollMillis,
              onRelease: (now) =>
                Effect.zipRight(
                  Ref.update(counts, (c) => ({ ...c, released: c.released + 1 })),
                  output.event({ event: "released", task_id: taskId, attempt: lease.attempt, now })
                )
            }).pipe(
              Effect.tap((report) =>
                Effect.zipRight(
                  Ref.update(counts, (c) => ({
                    ...c,
                    finished: c.finished + (report.end._tag === "complete" ? 1 : 0),
                    failed: c.failed + (report.end._tag === "failed" && !report.end.requeued ? 1 : 0),
                    retried: c.retried + (report.end._tag === "failed" && report.end.requeued ? 1 : 0),
                    cancelled: c.cancelled + (report.end._tag === "cancelled" ? 1 : 0)
                  })),
                  output.event({
                    event: "finished",
                    task_id: taskId,
                    attempt: report.attempt,
                    provider: report.provider,
                    outcome: report.end._tag,
                    duration_ms: report.duration_ms,
                    ...(report.end._tag === "failed"
                      ? {
                          error: {
                            tag: report.end.error.tag,
                            message: report.end.error.message,
                            retryable: report.end.error.retryable === true
                          },
                          requeued: report.end.requeued
                        }
                      : {})
                  })
                )
              ),
              Effect.asVoid,
              Effect.catchAll(storageFailed),
              Effect.ensuring(Effect.zipRight(unreserve(taskId), Queue.offer(freed, undefined)))
            )
            // A fiber forked here would inherit the uninterruptible region: the attempt must stay
            // interruptible, or neither a cancel nor a shutdown could stop its provider.
            yield* FiberSet.run(attempts, Effect.interruptible(attempt))
            return true
          })
        )

      /**
       * The ready tasks of the last look not yet tried, oldest first. A freed slot takes the next
       * of them without reading the queue again: a claim is checked under the store's guard, so
       * one that another worker took or that was cancelled meanwhile is simply declined. Reading
       * the whole queue for every freed slot would cost O(queue) per task.
       */
      const pending = yield* Ref.make<ReadonlyArray<ReadyTask>>([])

      /**
       * Reserve a slot for each task of `pending` that fits, in order, then claim them, as many
       * at once as the store gains from (`claimConcurrency`): on PostgreSQL a claim is a round
       * trip, and one after another they would bound the worker's rate. Tasks a per-provider cap
       * holds back stay for later. Attempts that ended meanwhile (or claims declined) free slots
       * again, so it goes round until no slot is free or nothing fits.
       */
      const fill = Effect.gen(function* () {
        while (true) {
          const tasks = yield* Ref.get(pending)
          const kept: Array<ReadyTask> = []
          const chosen: Array<ReadyTask> = []
          for (const [index, task] of tasks.entries()) {
            const verdict = yield* Ref.modify(running, (current) => {
              if (current.size >= options.concurrency) return ["full", current] as const
              if (current.has(task.task_id)) return ["running", current] as const
              if (!roomFor(current, task.provider)) return ["capped", current] as const
              return ["reserved", new Map(current).set(task.task_id, task.provider)] as const
            })
            if (verdict === "full") {
              kept.push(...tasks.slice(index))
              break
            }
            if (verdict === "capped") kept.push(task)
            if (verdict === "reserved") chosen.push(task)
          }
          yield* Ref.set(pending, kept)
          const claimed = yield* Effect.forEach(
            chosen,
            (task) =>
              start(task).pipe(
                Effect.catchTags({
                  UnknownTask: () => Effect.succeed(false),
                  InvalidRecord: () => Effect.succeed(false)
                })
              ),
            { concurrency: store.claimConcurrency }
          )
          // Each round uses up the tasks it chose, so this ends. Going back to wait instead would
          // let every wake-up (on the file store, each claim moves a marker) cost a look.
          if (claimed.length === 0 || kept.length === 0) return
        }
      })

      /** Look at the queue once: reap, then claim what fits. Returns how long to sleep. */
      const look = Effect.gen(function* () {
        const snapshot = yield* store.live
        const reap = yield* reapSnapshot(snapshot)
        for (const task of reap.reaped) {
          yield* output.event({
            event: "reaped",
            task_id: task.task_id,
            attempt: task.attempt,
            reason: task.reason,
            now: task.now
          })
        }
        yield* Ref.update(counts, (c) => ({ ...c, reaped: c.reaped + reap.reaped.length }))
        yield* Ref.set(queued, snapshot.queued.length)
        yield* Ref.set(pending, snapshot.ready)
        yield* fill
        yield* showStatus
        const now = yield* Clock.currentTimeMillis
        const due = snapshot.next_due_at === null ? Infinity : timeMillis(snapshot.next_due_at) - now
        return Math.max(Math.min(options.pollMillis, due), 10)
      })

      /**
       * Wait for a reason to look at the queue again: a wake-up, the deadline (the poll, which
       * also reaps, or the first retry coming due), or a freed slot that `pending` cannot fill.
       * At full capacity new work cannot be taken, so only a freed slot or the deadline count:
       * other workers' claims do not make everyone rescan.
       */
      const waitToLook = (deadline: number) =>
        Effect.gen(function* () {
          while (true) {
            const remaining = deadline - (yield* Clock.currentTimeMillis)
            if (remaining <= 0) return
            const full = (yield* Ref.get(running)).size >= options.concurrency
            const signal = yield* (
              full
                ? Effect.as(Queue.take(freed), "freed" as const)
                : Effect.race(
                    Effect.as(Queue.take(wake), "wake" as const),
                    Effect.as(Queue.take(freed), "freed" as const)
                  )
            ).pipe(Effect.timeoutOption(remaining))
            if (Option.isNone(signal) || signal.value === "wake") return
            yield* fill
            const free = (yield* Ref.get(running)).size < options.concurrency
            if (free && (yield* Ref.get(pending)).length === 0) return
          }
        })

      const loop = Effect.gen(function* () {
        while (true) {
          const sleep = yield* look
          yield* waitToLook((yield* Clock.currentTimeMillis) + sleep)
        }
      }).pipe(Effect.catchAll((error) => Effect.zipRight(storageFailed(error), Effect.never)))

      const stop: Stop = yield* Effect.raceAll([
        Effect.as(loop, { _tag: "signal", signal: "none" } as const),
        Effect.map(shutdown.requested, (signal): Stop => ({ _tag: "signal", signal })),
        Effect.map(Deferred.await(failure), (error): Stop => ({ _tag: "storage", error }))
      ])

      const reason = stop._tag === "storage" ? "storage_error" : stop.signal
      yield* heartbeats.stopping
      yield* output.event({
        event: "stopping",
        reason,
        running: (yield* Ref.get(running)).size,
        grace_ms: options.graceMillis
      })
      const forced = yield* Effect.raceFirst(
        Effect.as(Effect.timeoutOption(FiberSet.awaitEmpty(attempts), options.graceMillis), false),
        Effect.as(shutdown.forced, true)
      )
      // What is still running is stopped now; each attempt gives its task back as it ends.
      yield* FiberSet.clear(attempts)
      const done = yield* Ref.get(counts)
      const finalReason = forced ? "forced" : reason
      yield* output.event({
        event: "stopped",
        reason: finalReason,
        finished: done.finished,
        failed: done.failed,
        released: done.released
      })
      if (stop._tag === "storage") return yield* stop.error
      return { reason: finalReason, ...done }
    })
  ).pipe(Effect.withSpan("Worker.watch"))
