/**
 * The in-memory TaskStore: one `Ref` holding every record. Each operation is a single atomic
 * `Ref.modify`, so it needs no lock. For tests and for library users who want a queue that
 * lives as long as their process. Its backend is the map; `makeTaskStore` builds the port.
 */
import { Clock, Effect, Either, Option, PubSub, Ref, Stream } from "effect"
import { timeMillis } from "../../domain/time.js"
import { UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import type { TaskRecord } from "../../domain/Task.js"
import { submissionOrder } from "../../domain/Task.js"
import * as Transitions from "../../domain/transitions.js"
import type { WorkerPresence } from "../../domain/worker.js"
import { isWorkerPresence, presenceOrder } from "../../domain/worker.js"
import { Host } from "../../services/Host.js"
import type { WorkerRegistry } from "../../services/TaskStore.js"
import { providerOfPayload } from "../../domain/provider.js"
import { collectedOf } from "../../domain/retention.js"
import type { ClaimedTask } from "../../services/TaskStore.js"
import type { TaskStoreBackend } from "../make.js"
import { makeTaskStore } from "../make.js"
import { claimantFor, claimOne, claimRoomOf, fitsRoom, readiness, takeRoom, waitingTally } from "../shared.js"

export interface MemoryStoreOptions {
  readonly maxPayloadBytes?: number
}

export const makeMemoryTaskStore = (options: MemoryStoreOptions = {}) =>
  Effect.gen(function* () {
    const host = yield* Host
    const secret = yield* host.randomBytes(32)
    const records = yield* Ref.make(new Map<TaskId, TaskRecord>())
    /** Published on every write that may leave a task queued (a submission, a requeue). */
    const wakeups = yield* PubSub.sliding<void>(1)
    /** The id of every task written. */
    const changes = yield* PubSub.sliding<TaskId>(64)

    /** Apply `step` to one record atomically; it returns the new record (or none) and an answer. */
    const update = <A, E>(
      taskId: TaskId,
      step: (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>
    ) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Ref.modify(records, (map): readonly [Either.Either<A, E | UnknownTask>, Map<TaskId, TaskRecord>] => {
          const record = map.get(taskId)
          if (!record) return [Either.left(new UnknownTask({ taskId })), map]
          const stepped = step(record, now)
          if (Either.isLeft(stepped)) return [Either.left(stepped.left), map]
          const [next, answer] = stepped.right
          return [Either.right(answer), next ? new Map(map).set(taskId, next) : map]
        })
      ).pipe(
        Effect.tap(() =>
          Effect.flatMap(Ref.get(records), (map) =>
            map.get(taskId)?.state === "queued" ? PubSub.publish(wakeups, undefined) : Effect.void
          )
        ),
        Effect.tap(() => PubSub.publish(changes, taskId)),
        Effect.flatMap((either) => either)
      )

    const presences = yield* Ref.make(new Map<string, WorkerPresence>())
    const workers: WorkerRegistry = {
      announce: (presence) => Ref.update(presences, (map) => new Map(map).set(presence.instance, presence)),
      retire: (instance) =>
        Ref.update(presences, (map) => {
          const next = new Map(map)
          next.delete(instance)
          return next
        }),
      // As the other stores list what decodes: an entry filled wrongly is left out.
      list: Effect.map(Ref.get(presences), (map) =>
        [...map.values()].filter(isWorkerPresence).sort(presenceOrder)
      ),
      prune: (expiredBefore) =>
        Ref.modify(presences, (map) => {
          const kept = [...map].filter(([, presence]) => timeMillis(presence.expires_at) >= expiredBefore)
          return [map.size - kept.length, new Map(kept)] as const
        })
    }

    const backend: TaskStoreBackend = {
      taskIdFor: (clientRequestId) => Effect.succeed(Transitions.taskIdFor(secret, clientRequestId)),
      load: (taskId) => Effect.map(Ref.get(records), (map) => Option.fromNullable(map.get(taskId))),
      insertIfAbsent: (record) =>
        Ref.modify(records, (map) => {
          const existing = map.get(record.task_id)
          return existing
            ? ([Option.some(existing), map] as const)
            : ([Option.none(), new Map(map).set(record.task_id, record)] as const)
        }).pipe(
          Effect.tap((existing) =>
            Option.isNone(existing)
              ? Effect.zipRight(PubSub.publish(wakeups, undefined), PubSub.publish(changes, record.task_id))
              : Effect.void
          )
        ),
      apply: update,
      scan: Effect.map(Ref.get(records), (map) => ({ records: [...map.values()], invalid: [] })),
      live: Effect.gen(function* () {
        const all = [...(yield* Ref.get(records)).values()]
        const queued = all.filter((record) => record.state === "queued").sort(submissionOrder)
        return {
          queued: queued.map((record) => record.task_id),
          ...readiness(queued, yield* Clock.currentTimeMillis),
          running: all.filter((record) => record.state === "running"),
          invalid: []
        }
      }),
      claimNext: Effect.fn("TaskStore.claimNext")(function* (request) {
        const now = yield* Clock.currentTimeMillis
        const queued = [...(yield* Ref.get(records)).values()].filter((record) => record.state === "queued")
        // One lease token per claim, drawn before the atomic step (which cannot draw them).
        const claimants = yield* Effect.forEach(
          Array.from({ length: Math.min(Math.max(0, request.limit), queued.length) }),
          () => claimantFor(host, request.workerId)
        )
        const batch = yield* Ref.modify(records, (map) => {
          const claimed: Array<ClaimedTask> = []
          const tally = waitingTally()
          let room = claimRoomOf(request)
          const next = new Map(map)
          const candidates = [...map.values()]
            .filter((record) => record.state === "queued")
            .sort(submissionOrder)
          for (const record of candidates) {
            const claimant = claimants[claimed.length]
            if (room.left === 0 || claimant === undefined) break
            if (!Transitions.isDue(record, now)) {
              tally.meet(record)
              continue
            }
            const provider = providerOfPayload(record.payload)
            if (!fitsRoom(room, provider)) continue
            const taken = claimOne(record, claimant, now, request)
            if (taken === undefined) continue
            claimed.push(taken)
            next.set(record.task_id, taken.record)
            room = takeRoom(room, provider)
          }
          return [
            { claimed, invalid: [], ...tally.result(), queued: candidates.length - claimed.length },
            next
          ] as const
        })
        for (const { record } of batch.claimed) yield* PubSub.publish(changes, record.task_id)
        return batch
      }),
      running: Effect.map(Ref.get(records), (map) => ({
        running: [...map.values()].filter((record) => record.state === "running").sort(submissionOrder),
        invalid: []
      })),
      wakeups: Stream.fromPubSub(wakeups),
      changes: Stream.fromPubSub(changes),
      // One atomic step: no write can land between the choice and the removal.
      collect: (choose, dryRun) =>
        Ref.modify(records, (map) => {
          const chosen = choose([...map.values()])
          if (dryRun || chosen.length === 0) return [chosen, map] as const
          const next = new Map(map)
          for (const record of chosen) next.delete(record.task_id)
          return [chosen, next] as const
        }).pipe(
          Effect.tap((chosen) =>
            dryRun ? Effect.void : Effect.forEach(chosen, (record) => PubSub.publish(changes, record.task_id))
          ),
          Effect.map((chosen) => ({ removed: chosen.map(collectedOf), invalid: [] }))
        ),
      workers
    }
    return makeTaskStore(host, backend, { maxPayloadBytes: options.maxPayloadBytes })
  })
