/**
 * The in-memory TaskStore: one `Ref` holding every record. Each operation is a single atomic
 * `Ref.modify`, so it needs no lock. For tests and for library users who want a queue that
 * lives as long as their process.
 */
import { Clock, Effect, Either, PubSub, Ref, Stream } from "effect"
import { timeMillis } from "../../domain/time.js"
import { UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { DefaultMaxPayloadBytes, preparePayload } from "../../domain/submission.js"
import type { TaskRecord } from "../../domain/Task.js"
import { submissionOrder, toReceipt, toView } from "../../domain/Task.js"
import * as Transitions from "../../domain/transitions.js"
import type { WorkerPresence } from "../../domain/worker.js"
import { isWorkerPresence, presenceOrder } from "../../domain/worker.js"
import { Host } from "../../services/Host.js"
import type { TaskStoreShape, WorkerRegistry } from "../../services/TaskStore.js"
import { providerOfPayload } from "../../domain/provider.js"
import type { ClaimedTask } from "../../services/TaskStore.js"
import {
  claimantFor,
  claimOne,
  claimRoomOf,
  emptyStateCounts,
  fitsRoom,
  pageOf,
  readiness,
  takeRoom,
  transitionOperations,
  waitingTally
} from "../shared.js"

export interface MemoryStoreOptions {
  readonly maxPayloadBytes?: number
}

export const makeMemoryTaskStore = (options: MemoryStoreOptions = {}) =>
  Effect.gen(function* () {
    const host = yield* Host
    const secret = yield* host.randomBytes(32)
    const records = yield* Ref.make(new Map<TaskId, TaskRecord>())
    const maxPayloadBytes = options.maxPayloadBytes ?? DefaultMaxPayloadBytes
    /** Published on every write that may leave a task queued (a submission, a requeue). */
    const wakeups = yield* PubSub.sliding<void>(1)
    /** The id of every task written. */
    const changes = yield* PubSub.sliding<TaskId>(64)

    const find = (taskId: TaskId) =>
      Effect.flatMap(Ref.get(records), (map) => {
        const record = map.get(taskId)
        return record ? Effect.succeed(record) : Effect.fail(new UnknownTask({ taskId }))
      })

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

    const check: TaskStoreShape["check"] = Effect.map(Ref.get(records), (map) => {
      const states = emptyStateCounts()
      for (const record of map.values()) states[record.state] += 1
      return { records: map.size, states, invalid_records: [] }
    })

    const store: TaskStoreShape = {
      ...transitionOperations(host, update),
      submit: Effect.fn("TaskStore.submit")(function* (request) {
        const prepared = yield* preparePayload(request.payload, maxPayloadBytes)
        const taskId = Transitions.taskIdFor(secret, request.clientRequestId)
        const now = yield* Clock.currentTimeMillis
        return yield* Ref.modify(records, (map) => {
          const existing = map.get(taskId)
          if (existing) return [Transitions.resubmit(existing, prepared.sha), map] as const
          const record = Transitions.newRecord({
            taskId,
            clientRequestId: request.clientRequestId,
            payload: request.payload,
            payloadSha256: prepared.sha,
            now
          })
          return [Either.right(toReceipt(record)), new Map(map).set(taskId, record)] as const
        }).pipe(
          Effect.tap(() => PubSub.publish(wakeups, undefined)),
          Effect.tap(() => PubSub.publish(changes, taskId)),
          Effect.flatMap((either) => either)
        )
      }),
      record: Effect.fn("TaskStore.record")((taskId: TaskId) => find(taskId)),
      read: Effect.fn("TaskStore.read")(function* (taskId, sha) {
        const record = yield* find(taskId)
        return toView(yield* Transitions.checkHash(record, sha))
      }),
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
      // Claims cost nothing here; tests of the worker see claims in flight at once.
      claimConcurrency: 8,
      changes: Stream.fromPubSub(changes),
      list: Effect.fn("TaskStore.list")(function* (request) {
        const map = yield* Ref.get(records)
        return yield* pageOf(map.values(), request)
      }),
      check,
      counts: Effect.map(check, (report) => report.states),
      workers
    }
    return store
  })
