/**
 * Retention: which finished tasks a collection (`relaykeep gc`, a watching worker's
 * `--retention`) may remove. Pure, so that every store removes the same tasks for the same
 * records, and the contract suite can hold them to it.
 */
import { Either } from "effect"
import { groupOfMember, membersListedBy } from "./broadcast.js"
import { InvalidInput } from "./errors.js"
import type { RecordHead, TaskState } from "./Task.js"
import { timeMillis } from "./time.js"

/** What a collection is asked to remove. */
export interface CollectRequest {
  /** Finished tasks whose `finished_at` is before this (epoch ms) may be removed. */
  readonly finishedBefore: number
  /** The newest this many finished tasks (by `finished_at`) are kept, however old. */
  readonly keepLast?: number | undefined
  /** Report what would be removed, and remove nothing. */
  readonly dryRun?: boolean | undefined
}

/** The finished states: the only ones a task never leaves, so the only ones collected. */
export type FinishedState = Extract<TaskState, "complete" | "failed" | "cancelled">

export const isFinishedState = (state: TaskState): state is FinishedState =>
  state === "complete" || state === "failed" || state === "cancelled"

/** One task a collection removed (or, dry, would remove). */
export interface CollectedTask {
  readonly task_id: string
  readonly client_request_id: string
  readonly state: FinishedState
  readonly finished_at: string
}

export const collectedOf = (head: RecordHead & { readonly state: FinishedState }): CollectedTask => ({
  task_id: head.task_id,
  client_request_id: head.client_request_id,
  state: head.state,
  finished_at: head.finished_at ?? head.updated_at
})

/** The request checked before any store is touched: bad input changes nothing. */
export const checkCollectRequest = (request: CollectRequest): Either.Either<CollectRequest, InvalidInput> => {
  if (!Number.isFinite(request.finishedBefore))
    return Either.left(new InvalidInput({ field: "finished_before", reason: "must be a point in time" }))
  if (request.keepLast !== undefined && !(Number.isSafeInteger(request.keepLast) && request.keepLast >= 0))
    return Either.left(new InvalidInput({ field: "keep_last", reason: "must be a whole number from 0" }))
  return Either.right(request)
}

/**
 * When a finished task's ttl lets it go (epoch ms): `finished_at + ttl_ms`, since an MCP
 * client was promised its result at least that long (the MCP ttl counts from creation, which is
 * earlier, so this floor meets it too). Infinity for a task whose ttl is null (no limit asked
 * for); no floor for a task that asked for none.
 */
export const ttlFloor = (head: RecordHead): number => {
  if (head.ttl_ms === undefined) return -Infinity
  if (head.ttl_ms === null) return Infinity
  return finishedMillis(head) + head.ttl_ms
}

const finishedMillis = (head: RecordHead): number => timeMillis(head.finished_at ?? head.updated_at)

/** Newest finished first; ties by task id, so that keep-last is the same on every store. */
const newestFinishedFirst = (a: RecordHead, b: RecordHead): number =>
  finishedMillis(b) - finishedMillis(a) || (a.task_id < b.task_id ? 1 : a.task_id > b.task_id ? -1 : 0)

/**
 * Of `heads` (any states, any order), the finished ones a collection at `now` removes: finished
 * before the cutoff, not among the newest `keepLast` finished, and past their ttl's floor.
 * Queued and running tasks are never chosen, whatever their age.
 *
 * A broadcast goes as one: its group record and its members (`broadcast:<group>:<n>`) are
 * removed together or not at all, so a group that still reads finds every member, and a member
 * never outlives its group to conflict with the next broadcast under the same request id. Every
 * record of a group `heads` holds counts, whatever its state: a store that passes only finished
 * heads adds the heads of the groups and members they name (`namedByGroups`). Group records come
 * first in the answer, each before its members; a store removes in that order and passes over a
 * member whose group it could not remove (`waitsForGroup`).
 */
export const chooseCollectable = <H extends RecordHead>(
  heads: ReadonlyArray<H>,
  request: CollectRequest,
  now: number
): ReadonlyArray<H & { readonly state: FinishedState }> => {
  const finished = heads
    .filter((head): head is H & { readonly state: FinishedState } => isFinishedState(head.state))
    .sort(newestFinishedFirst)
  const eligible = finished
    .slice(request.keepLast ?? 0)
    .filter((head) => finishedMillis(head) < request.finishedBefore && ttlFloor(head) <= now)
  const chosen = new Set<string>(eligible.map((head) => head.task_id))
  // Each group, with every record of it present: its record (when present) and its members.
  const groups = new Map<string, Array<string>>()
  for (const head of heads) {
    const group = groupOfMember(head.client_request_id)
    if (group === undefined) continue
    const records = groups.get(group) ?? [group]
    records.push(head.task_id)
    groups.set(group, records)
  }
  const present = new Set<string>(heads.map((head) => head.task_id))
  const wholeGroupGoes = (group: string): boolean =>
    (groups.get(group) ?? [group]).every((taskId) => !present.has(taskId) || chosen.has(taskId))
  const going = eligible.filter((head) => {
    const group =
      groupOfMember(head.client_request_id) ?? (groups.has(head.task_id) ? head.task_id : undefined)
    return group === undefined || wholeGroupGoes(group)
  })
  // Group records (and tasks of no group) first, each member after: a stable split.
  return [
    ...going.filter((head) => groupOfMember(head.client_request_id) === undefined),
    ...going.filter((head) => groupOfMember(head.client_request_id) !== undefined)
  ]
}

/**
 * The task ids `heads` name beyond themselves: the groups their members belong to, and the
 * members their group records list. A store that reads only finished heads adds these, whatever
 * their state, so that a broadcast's live part keeps the rest of it.
 */
export const namedByGroups = (heads: ReadonlyArray<RecordHead>): ReadonlyArray<string> => {
  const seen = new Set<string>(heads.map((head) => head.task_id))
  const named = new Set<string>()
  for (const head of heads) {
    const group = groupOfMember(head.client_request_id)
    if (group !== undefined) named.add(group)
    for (const member of membersListedBy(head)) named.add(member)
  }
  return [...named].filter((taskId) => !seen.has(taskId))
}

/**
 * Whether a chosen member must stay because its group record, chosen too, was not removed (a
 * lock held, a write since the scan): removing it would leave a group that reads no more.
 */
export const waitsForGroup = (
  head: RecordHead,
  chosen: ReadonlySet<string>,
  removed: ReadonlySet<string>
): boolean => {
  const group = groupOfMember(head.client_request_id)
  return group !== undefined && chosen.has(group) && !removed.has(group)
}

/** Whether a record is still the one a collection chose: finished, and finished at the same time. */
export const stillCollectable = (chosen: RecordHead, current: RecordHead): boolean =>
  isFinishedState(current.state) &&
  current.finished_at === chosen.finished_at &&
  current.created_at === chosen.created_at
