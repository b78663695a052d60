/**
 * Submitting a broadcast: one task per target under one group, composed from the TaskStore's own
 * operations so that it means the same on every store. The group is a record of its own (the
 * reserved provider `broadcast`), submitted first: its request id gives the whole broadcast the
 * store's idempotency and conflict detection. Then each member is submitted under a request id
 * derived from the group's task id, and last the submitter claims the group record and completes
 * it with the members' receipts. Only then is the group acknowledged.
 */
import { Clock, Effect, Option } from "effect"
import type { BroadcastFields, GroupReceipt, Member, MemberReceipt, Target } from "../domain/broadcast.js"
import {
  decodeTargets,
  groupMembersOf,
  GroupUnsettled,
  groupPayload,
  isGroupPayload,
  memberPayloads,
  memberRequestId
} from "../domain/broadcast.js"
import type { ConflictError, StorageError, UnknownTask } from "../domain/errors.js"
import type { InvalidRecord } from "../domain/errors.js"
import { InvalidInput } from "../domain/errors.js"
import { checkRequestId } from "../domain/mcpTask.js"
import type { ClientRequestId, TaskId } from "../domain/ids.js"
import type { JsonObject, Receipt, RetryPolicy } from "../domain/Task.js"
import { TaskStore } from "../services/TaskStore.js"
import type { TaskStoreShape } from "../services/TaskStore.js"
import { changesOf, PollMillis } from "./wait.js"

export interface BroadcastRequest {
  /** The group's idempotency key: the same key, targets and payload return the same group receipt. */
  readonly clientRequestId: ClientRequestId
  /** 1-8 distinct `{provider, model}`, in the order the members are queued and shown. */
  readonly targets: ReadonlyArray<Target>
  /** The part every member shares (`prompt`, a CLI's `work_dir`): never `provider` or `model`. */
  readonly payload: JsonObject
}

export type BroadcastError =
  InvalidInput | ConflictError | InvalidRecord | StorageError | UnknownTask | GroupUnsettled

/** The submitter's lease on the group record: far longer than the one write it covers. */
const SettleLeaseMillis = 60_000

/**
 * Many attempts and no backoff: a submitter that dies holding the group record leaves it to a
 * reaper, which then queues it again (never fails it), ready for the same broadcast to settle.
 */
const SettleRetry: RetryPolicy = { max_attempts: 1000, backoff_initial_ms: 0, backoff_max_ms: 0 }

/** How long a submitter waits for another one that holds the same group record to settle it. */
const SettleWaitMillis = 10_000

const DefaultFields: BroadcastFields = { targets: "targets", payload: "payload" }

/**
 * Claim the group record and complete it with the members' receipts. A record already complete
 * answers with the receipts it holds; one another submitter holds is waited for a while (its
 * members are durable already, so past the wait the receipts composed here stand); a cancelled or
 * failed record can never be settled.
 */
const settle = (
  store: TaskStoreShape,
  groupId: TaskId,
  members: ReadonlyArray<MemberReceipt>
): Effect.Effect<ReadonlyArray<MemberReceipt>, InvalidRecord | StorageError | UnknownTask | GroupUnsettled> =>
  Effect.scoped(
    Effect.gen(function* () {
      const nextChange = yield* changesOf(store, [groupId])
      const deadline = (yield* Clock.currentTimeMillis) + SettleWaitMillis
      for (;;) {
        const head = yield* store.peek(groupId)
        switch (head.state) {
          case "complete":
            return yield* groupMembersOf(groupId, head.result)
          case "cancelled":
          case "failed":
            return yield* new GroupUnsettled({ groupId, state: head.state })
          case "queued": {
            const claimed = yield* store.claim(groupId, {
              workerId: "broadcast",
              leaseMillis: SettleLeaseMillis,
              retry: SettleRetry,
              accept: (record) => isGroupPayload(record.payload)
            })
            if (Option.isSome(claimed)) {
              const settled = yield* store
                .complete(groupId, claimed.value.lease, { members })
                .pipe(Effect.catchTag("StaleAttempt", () => Effect.succeed("lost")))
              if (settled === "complete") return members
              continue
            }
            break
          }
          case "running":
            break
        }
        // Another submitter holds it (or took it first): it settles within moments.
        const now = yield* Clock.currentTimeMillis
        if (now >= deadline) return members
        yield* nextChange(Math.min(PollMillis / 10, deadline - now))
      }
    })
  )

/**
 * Queue one task per target under one group, and return the group receipt once every member is
 * durable. Idempotent like `submit`: the same request id, targets and payload return the same
 * group receipt; different ones under the same id fail with ConflictError and change nothing.
 * Every member payload is checked before anything is stored. A submitter that stops before the
 * end has acknowledged nothing: the group record waits, claimed by no worker, until the same
 * broadcast is submitted again, which finishes it. `fields` names the caller's fields in errors.
 */
export const submitBroadcast = (
  request: BroadcastRequest,
  fields: BroadcastFields = DefaultFields
): Effect.Effect<GroupReceipt, BroadcastError, TaskStore> =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    yield* checkRequestId(request.clientRequestId)
    const targets = yield* decodeTargets(request.targets, fields.targets)
    const members = yield* memberPayloads(targets, request.payload, fields)
    // The group record is at least as large as any member (it holds the shared part and every
    // target), so the store's size limit on it bounds the members too.
    const group = yield* store
      .submit({ clientRequestId: request.clientRequestId, payload: groupPayload(targets, request.payload) })
      .pipe(
        Effect.mapError((error) =>
          error._tag === "InvalidInput" && error.field === "payload" && fields.payload !== "payload"
            ? new InvalidInput({ field: fields.payload, reason: error.reason })
            : error
        )
      )
    const head = yield* store.peek(group.task_id)
    if (head.state === "complete") return receiptOf(group, yield* groupMembersOf(group.task_id, head.result))
    // A group record cancelled or failed can never be settled: no member is queued for it.
    if (head.state === "cancelled" || head.state === "failed")
      return yield* new GroupUnsettled({ groupId: group.task_id, state: head.state })
    const receipts = yield* submitMembers(store, group.task_id, members).pipe(
      // A member's id held by another payload (a member left from a group collected since, or
      // taken before ids were reserved): this group can never be settled, so its record is
      // cancelled rather than left queued for nobody, and the conflict is answered.
      Effect.tapErrorTag("ConflictError", () =>
        Effect.ignore(store.cancel(group.task_id, group.payload_sha256))
      )
    )
    return receiptOf(group, yield* settle(store, group.task_id, receipts))
  }).pipe(Effect.withSpan("Broadcast.submit"))

/** Each member in target order, idempotently: a member already queued answers with its receipt. */
const submitMembers = (store: TaskStoreShape, groupId: TaskId, members: ReadonlyArray<Member>) =>
  Effect.forEach(members, ({ target, payload }, index) =>
    Effect.map(
      store.submit({ clientRequestId: memberRequestId(groupId, index), payload }),
      (receipt): MemberReceipt => ({ provider: target.provider, model: target.model, ...receipt })
    )
  )

const receiptOf = (group: Receipt, members: ReadonlyArray<MemberReceipt>): GroupReceipt => ({
  group_id: group.task_id,
  payload_sha256: group.payload_sha256,
  created_at: group.created_at,
  members
})
