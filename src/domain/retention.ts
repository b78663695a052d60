/**
 * Retention: which finished tasks a collection (`relaykeep gc`, a watching worker's
 * `--retention`) may remove. Pure, so that every store removes the same tasks for the same
 * records, and the contract suite can hold them to it.
 */
import { Either } from "effect"
import { groupOfMember } from "./broadcast.js"
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
 * A broadcast member stays while its settled (finished) group record does: a group is read
 * through every member, so a group that can still be read finds them all. The group record, settled when it was submitted,
 * usually goes first; each member then stays readable with its own receipt until it goes too.
 */
export const chooseCollectable = <H extends RecordHead>(
  heads: ReadonlyArray<H>,
  request: CollectRequest,
  now: number
): ReadonlyArray<H & { readonly state: FinishedState }> => {
  const finished = heads
    .filter((head): head is H & { readonly state: FinishedState } => isFinishedState(head.state))
    .sort(newestFinishedFirst)
  const chosen = finished
    .slice(request.keepLast ?? 0)
    .filter((head) => finishedMillis(head) < request.finishedBefore && ttlFloor(head) <= now)
  const going = new Set<string>(chosen.map((head) => head.task_id))
  const present = new Set<string>(finished.map((head) => head.task_id))
  return chosen.filter((head) => {
    const group = groupOfMember(head.client_request_id)
    return group === undefined || !present.has(group) || going.has(group)
  })
}

/** Whether a record is still the one a collection chose: finished, and finished at the same time. */
export const stillCollectable = (chosen: RecordHead, current: RecordHead): boolean =>
  isFinishedState(current.state) &&
  current.finished_at === chosen.finished_at &&
  current.created_at === chosen.created_at
