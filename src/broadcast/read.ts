/**
 * Reading a broadcast group: every member's task side by side, each read with its own receipt
 * from the settled group record. Optionally waits until every member has finished.
 */
import type { Scope } from "effect"
import { Clock, Effect, Either } from "effect"
import type { GroupView, MemberReceipt } from "../domain/broadcast.js"
import {
  groupMembersOf,
  groupViewOf,
  GroupUnsettled,
  isGroupPayload,
  NotAGroup
} from "../domain/broadcast.js"
import type { PayloadSha256, TaskId } from "../domain/ids.js"
import type { TaskRecord } from "../domain/Task.js"
import { isTerminal } from "../domain/Task.js"
import type { ReadError, TaskStoreShape } from "../services/TaskStore.js"
import { TaskStore } from "../services/TaskStore.js"
import { changesOf, PollMillis } from "./wait.js"

export interface ReadGroupOptions {
  /** Wait this long at most for every member to finish (0, the default: read at once). */
  readonly waitMillis?: number | undefined
  /** Called between looks while waiting, with the milliseconds waited so far and the group as it was. */
  readonly onProgress?: ((waitedMillis: number, view: GroupView) => Effect.Effect<void>) | undefined
}

export type ReadGroupError = ReadError | NotAGroup | GroupUnsettled

/** The members a group record names, once it is known to be a settled group. */
const membersOf = (record: TaskRecord): Either.Either<ReadonlyArray<MemberReceipt>, ReadGroupError> => {
  if (!isGroupPayload(record.payload)) return Either.left(new NotAGroup({ taskId: record.task_id }))
  if (record.state !== "complete")
    return Either.left(new GroupUnsettled({ groupId: record.task_id, state: record.state }))
  return groupMembersOf(record.task_id, record.result)
}

/** The group as it is now: each member read with its own receipt. */
const lookAt = (store: TaskStoreShape, record: TaskRecord, members: ReadonlyArray<MemberReceipt>) =>
  Effect.map(
    Effect.forEach(members, (member) =>
      Effect.map(store.read(member.task_id, member.payload_sha256), (view) => ({ member, view }))
    ),
    (read) => groupViewOf(record, read)
  )

/** Read the group in `record`, waiting as `options` ask. */
const readRecord = (
  store: TaskStoreShape,
  record: TaskRecord,
  options: ReadGroupOptions
): Effect.Effect<GroupView, ReadGroupError, Scope.Scope> =>
  Effect.gen(function* () {
    const members = yield* membersOf(record)
    const waitMillis = options.waitMillis ?? 0
    // A change of any member (a file watch, a NOTIFY) wakes the wait at once; the poll is the
    // fallback for a signal that never comes. Listening starts before the first look.
    const nextChange =
      waitMillis > 0
        ? yield* changesOf(
            store,
            members.map((member) => member.task_id)
          )
        : () => Effect.void
    const started = yield* Clock.currentTimeMillis
    for (;;) {
      const view = yield* lookAt(store, record, members)
      const elapsed = (yield* Clock.currentTimeMillis) - started
      if (view.members.every((member) => isTerminal(member.state)) || elapsed >= waitMillis) return view
      if (options.onProgress !== undefined) yield* options.onProgress(elapsed, view)
      yield* nextChange(Math.min(PollMillis, waitMillis - elapsed))
    }
  })

/**
 * A group by its receipt: the group's hash is the capability, as a task's is, so a wrong one is
 * HashMismatch and an unknown id UnknownTask, exactly as `read` answers. A task that is not a
 * group is NotAGroup; a group never acknowledged is GroupUnsettled.
 */
export const readGroup = (
  groupId: TaskId,
  payloadSha256: PayloadSha256,
  options: ReadGroupOptions = {}
): Effect.Effect<GroupView, ReadGroupError, TaskStore> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    // `read` judges the hash, with its own errors; the record it leaves out the payload of.
    yield* store.read(groupId, payloadSha256)
    return yield* Effect.scoped(readRecord(store, yield* store.record(groupId), options))
  }).pipe(Effect.withSpan("Broadcast.readGroup"))

/**
 * A group by its id alone, for a reader who may see everything (the dashboard's token holder,
 * who reads any record through `store.record`).
 */
export const readGroupTrusted = (
  groupId: TaskId,
  options: ReadGroupOptions = {}
): Effect.Effect<GroupView, ReadGroupError, TaskStore> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    return yield* Effect.scoped(readRecord(store, yield* store.record(groupId), options))
  }).pipe(Effect.withSpan("Broadcast.readGroupTrusted"))
