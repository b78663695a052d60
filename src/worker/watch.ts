/**
 * The long-running worker (`relaykeep worker --watch`). It claims with `TaskStore.claimNext`
 * (as many tasks as it has free slots, within per-provider caps) when it starts, on each new
 * submission (the store's `wakeups`), when a slot frees while more work may wait, and when the
 * first retry comes due; every `pollMillis` it also reaps orphans (reading only running tasks)
 * and claims again, in case a wake-up was missed. No step reads the queue: each costs what the
 * claimed tasks cost, whatever the backlog.
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
import { providerOfPayload } from "../domain/provider.js"
import type { RetryPolicy } from "../domain/Task.js"
import { timeMillis } from "../domain/Task.js"
import { Host } from "../services/Host.js"
import type { Provider } from "../services/Provider.js"
import { Shutdown } from "../services/Shutdown.js"
import type { ClaimedTask } from "../services/TaskStore.js"
import { TaskStore } from "../services/TaskStore.js"
import type { AttemptReport } from "./attempt.js"
import { runAttempt } from "./attempt.js"
import { WorkerOutput } from "../services/WorkerOutput.js"
import type { WorkerEvent } from "../services/WorkerOutput.js"
import { startHeartbeats } from "./heartbeats.js"
import { reapOrphans } from "./reap.js"
import { collectOnTimer } from "./retention.js"
import type { RunningSet } from "./slots.js"
import { claimAgainWhenFreed, roomOf, withClaimed, withoutAttempt } from "./slots.js"

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
  /** Collect tasks that finished longer ago than this, at the start and on a timer (`retention.ts`). */
  readonly retentionMillis?: number | undefined
}

export const DefaultConcurrency = 2
export const DefaultHeartbeatMillis = 5_000
export const DefaultPollMillis = 5_000
export const DefaultGraceMillis = 30_000
/** How soon a worker asks again for tasks another writer held mid-change (`ClaimBatch.busy`). */
export const BusyRetryMillis = 20

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

/** Outcome counts of a watch, for its summary. */
interface Counts {
  readonly finished: number
  readonly failed: number
  readonly retried: number
  readonly cancelled: number
  readonly released: number
  readonly reaped: number
}

const noCounts: Counts = { finished: 0, failed: 0, retried: 0, cancelled: 0, released: 0, reaped: 0 }

/** The counts after one attempt ended. */
const countEnd = (counts: Counts, report: AttemptReport): Counts => ({
  ...counts,
  finished: counts.finished + (report.end._tag === "complete" ? 1 : 0),
  failed: counts.failed + (report.end._tag === "failed" && !report.end.requeued ? 1 : 0),
  retried: counts.retried + (report.end._tag === "failed" && report.end.requeued ? 1 : 0),
  cancelled: counts.cancelled + (report.end._tag === "cancelled" ? 1 : 0)
})

/** The `finished` event of one attempt. */
const finishedEvent = (report: AttemptReport): WorkerEvent => ({
  event: "finished",
  task_id: report.task_id,
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

      // Two reasons to claim again: the queue may have new work (a wake-up from the store), or a
      // slot was freed (an attempt ended). Each sets its flag and pokes the loop; the loop takes
      // both flags at once, so neither can be lost to the other.
      const signals = yield* Ref.make({ wake: false, freed: false })
      const poke = yield* Queue.sliding<void>(1)
      const signal = (kind: "wake" | "freed") =>
        Effect.zipRight(
          Ref.update(signals, (flags) => ({ ...flags, [kind]: true })),
          Queue.offer(poke, undefined)
        )
      yield* store.wakeups.pipe(
        Stream.runForEach(() => signal("wake")),
        Effect.forkScoped
      )
      const running = yield* Ref.make<RunningSet>(new Map())
      const counts = yield* Ref.make(noCounts)
      /** The queued count the store last reported, when it can tell cheaply. */
      const queued = yield* Ref.make<number | undefined>(undefined)
      /** Whether a freed slot should claim at once (`claimAgainWhenFreed`). */
      const claimOnFree = yield* Ref.make(true)
      /** When the first retry the last claim met comes due (epoch ms). */
      const nextDue = yield* Ref.make(Infinity)
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
      if (options.retentionMillis !== undefined)
        yield* Effect.forkScoped(collectOnTimer(options.retentionMillis))

      const storageFailed = (error: StorageError) =>
        Effect.all(
          [
            heartbeats.silence,
            output.event({ event: "storage_error", message: error.message }),
            Deferred.succeed(failure, error)
          ],
          { discard: true }
        )

      /** One claimed task's attempt, to its end; its slot is given back and announced as it ends. */
      const attemptOf = (claimed: ClaimedTask) => {
        const { lease, record } = claimed
        const taskId = record.task_id
        return runAttempt(claimed, {
          leaseMillis: options.leaseMillis,
          cancelPollMillis: options.cancelPollMillis,
          onRelease: (state) =>
            Effect.zipRight(
              Ref.update(counts, (c) => ({ ...c, released: c.released + 1 })),
              output.event({ event: "released", task_id: taskId, attempt: lease.attempt, state })
            )
        }).pipe(
          Effect.tap((report) =>
            Effect.zipRight(
              Ref.update(counts, (c) => countEnd(c, report)),
              output.event(finishedEvent(report))
            )
          ),
          Effect.asVoid,
          Effect.catchAll(storageFailed),
          Effect.ensuring(
            Effect.all(
              [
                Ref.update(running, (current) => withoutAttempt(current, { taskId, attempt: lease.attempt })),
                showStatus,
                signal("freed")
              ],
              { discard: true }
            )
          )
        )
      }

      /**
       * Claim what the free slots and the caps allow, in one `claimNext`, and start an attempt
       * for each task. Uninterruptible from the claim to the forks, so that no claim is left
       * without a runner; each attempt's run stays interruptible (attempt.ts), or neither a
       * cancel nor a shutdown could stop its provider.
       */
      const claim = Effect.uninterruptible(
        Effect.gen(function* () {
          const asked = roomOf(yield* Ref.get(running), options)
          // Full: a slot freed later must claim, since this one could not ask.
          if (asked.limit === 0) return yield* Ref.set(claimOnFree, true)
          const batch = yield* store.claimNext({
            workerId: options.workerId,
            leaseMillis: options.leaseMillis,
            retry: options.retry,
            limit: asked.limit,
            room: asked.room
          })
          const taken = batch.claimed.map((claimed) => ({
            claimed,
            taskId: claimed.record.task_id,
            attempt: claimed.lease.attempt,
            provider: providerOfPayload(claimed.record.payload)
          }))
          yield* Ref.update(running, (current) => withClaimed(current, taken))
          for (const { claimed, taskId, provider } of taken) {
            yield* output.event({
              event: "claimed",
              task_id: taskId,
              attempt: claimed.lease.attempt,
              provider
            })
            // Forked from this uninterruptible region: an attempt cannot be stopped before its run
            // starts, so a shutdown that comes now still gives the task back (attempt.ts).
            yield* FiberSet.run(attempts, attemptOf(claimed))
          }
          yield* Ref.set(
            claimOnFree,
            claimAgainWhenFreed(
              asked,
              taken.map(({ provider }) => provider)
            )
          )
          if (batch.queued !== undefined) yield* Ref.set(queued, batch.queued)
          // Every waiting task was met only when the batch did not fill its slots.
          if (batch.claimed.length < asked.limit) {
            const due = batch.next_due_at === null ? Infinity : timeMillis(batch.next_due_at)
            // A task held mid-change (a submission between marker and record) is asked for again
            // shortly: the wake-up that announced it has been spent.
            const busyRetry =
              (batch.busy ?? 0) > 0 ? (yield* Clock.currentTimeMillis) + BusyRetryMillis : Infinity
            yield* Ref.set(nextDue, Math.min(due, busyRetry))
          }
          yield* showStatus
        })
      ).pipe(Effect.withSpan("Worker.claim"))

      /** Reap the orphans among the running tasks (never the queue), and report them. */
      const reap = Effect.gen(function* () {
        const report = yield* reapOrphans
        for (const task of report.reaped) {
          yield* output.event({
            event: "reaped",
            task_id: task.task_id,
            attempt: task.attempt,
            reason: task.reason,
            state: task.state
          })
        }
        yield* Ref.update(counts, (c) => ({ ...c, reaped: c.reaped + report.reaped.length }))
      }).pipe(Effect.withSpan("Worker.reap"))

      /**
       * Until `pollAt`, claim on each signal that may bring work: a wake-up, a retry coming due,
       * or a freed slot while more work may wait. At full capacity a claim asks the store
       * nothing, so other workers' claims (each a wake-up on the file store) cost no look.
       */
      const serveUntil = (pollAt: number) =>
        Effect.gen(function* () {
          while (true) {
            const now = yield* Clock.currentTimeMillis
            const dueAt = yield* Ref.get(nextDue)
            if (now >= pollAt) return
            if (now >= dueAt) {
              yield* Ref.set(nextDue, Infinity)
              yield* claim
              continue
            }
            const poked = yield* Queue.take(poke).pipe(
              Effect.timeoutOption(Math.max(Math.min(pollAt, dueAt) - now, 1))
            )
            if (Option.isNone(poked)) continue
            const flags = yield* Ref.getAndSet(signals, { wake: false, freed: false })
            if (flags.wake || (flags.freed && (yield* Ref.get(claimOnFree)))) yield* claim
          }
        })

      const loop = Effect.gen(function* () {
        while (true) {
          yield* reap
          yield* claim
          yield* serveUntil((yield* Clock.currentTimeMillis) + options.pollMillis)
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
