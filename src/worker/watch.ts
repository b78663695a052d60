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
import { WorkerOutput } from "./events.js"
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
}

export const DefaultConcurrency = 2
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
      const attempts = yield* FiberSet.make<void>()

      const showStatus = Effect.gen(function* () {
        const done = yield* Ref.get(counts)
        yield* output.status({
          running: (yield* Ref.get(running)).size,
          queued: yield* Ref.get(queued),
          finished: done.finished,
          failed: done.failed
        })
      })
      const storageFailed = (error: StorageError) =>
        Effect.zipRight(
          output.event({ event: "storage_error", message: error.message }),
          Deferred.succeed(failure, error)
        )

      yield* output.event({
        event: "started",
        worker_id: options.workerId,
        pid: host.pid,
        concurrency: options.concurrency,
        max_per_provider: Object.fromEntries(options.maxPerProvider),
        max_attempts: options.retry.max_attempts
      })

      /** Whether one more attempt of `provider` fits now. */
      const roomFor = (current: ReadonlyMap<TaskId, string>, provider: string) => {
        const cap = options.maxPerProvider.get(provider)
        if (current.size >= options.concurrency) return false
        if (cap === undefined) return true
        let taken = 0
        for (const name of current.values()) if (name === provider) taken += 1
        return taken < cap
      }

      /** Claim one task and start its attempt; uninterruptible, so no claim is left without a runner. */
      const start = (taskId: TaskId) =>
        Effect.uninterruptible(
          Effect.gen(function* () {
            const current = yield* Ref.get(running)
            const claimed = yield* store.claim(taskId, {
              workerId: options.workerId,
              leaseMillis: options.leaseMillis,
              retry: options.retry,
              accept: (record) => roomFor(current, providerOfPayload(record.payload))
            })
            if (Option.isNone(claimed)) return
            const { lease, record } = claimed.value
            const provider = providerOfPayload(record.payload)
            yield* Ref.update(running, (map) => new Map(map).set(taskId, provider))
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
              Effect.ensuring(
                Effect.zipRight(
                  Ref.update(running, (map) => {
                    const next = new Map(map)
                    next.delete(taskId)
                    return next
                  }),
                  Queue.offer(freed, undefined)
                )
              )
            )
            // A fiber forked here would inherit the uninterruptible region: the attempt must stay
            // interruptible, or neither a cancel nor a shutdown could stop its provider.
            yield* FiberSet.run(attempts, Effect.interruptible(attempt))
          })
        )

      /**
       * The ready tasks of the last look not yet tried, oldest first. A freed slot takes the next
       * of them without reading the queue again: a claim is checked under the store's guard, so
       * one that another worker took or that was cancelled meanwhile is simply declined. Reading
       * the whole queue for every freed slot would cost O(queue) per task.
       */
      const pending = yield* Ref.make<ReadonlyArray<ReadyTask>>([])

      /** Claim what fits from `pending`; keep the tasks a per-provider cap holds back for later. */
      const fill = Effect.gen(function* () {
        const kept: Array<ReadyTask> = []
        const tasks = yield* Ref.get(pending)
        for (const [index, task] of tasks.entries()) {
          const current = yield* Ref.get(running)
          if (current.size >= options.concurrency) {
            kept.push(...tasks.slice(index))
            break
          }
          if (current.has(task.task_id)) continue
          if (!roomFor(current, task.provider)) {
            kept.push(task)
            continue
          }
          yield* start(task.task_id).pipe(
            Effect.catchTags({ UnknownTask: () => Effect.void, InvalidRecord: () => Effect.void })
          )
        }
        yield* Ref.set(pending, kept)
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
