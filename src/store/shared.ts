/** Pieces every TaskStore implementation shares: paging, counting, the lease identity. */
import { Effect, Either } from "effect"
import { decodeCursor, encodeCursor } from "../domain/submission.js"
import type { TaskRecord, TaskState } from "../domain/Task.js"
import { toSummary } from "../domain/Task.js"
import type { Claimant } from "../domain/transitions.js"
import type { InvalidInput } from "../domain/errors.js"
import type { Host } from "../services/Host.js"
import type { ListRequest, TaskPage } from "../services/TaskStore.js"

export const DefaultListLimit = 50
export const MaxListLimit = 500

/** Newest first: the reverse of submission order. */
export const newestFirst = (a: TaskRecord, b: TaskRecord): number =>
  a.created_at > b.created_at
    ? -1
    : a.created_at < b.created_at
      ? 1
      : a.task_id > b.task_id
        ? -1
        : a.task_id < b.task_id
          ? 1
          : 0

/** One page of `records` (any order) for a list request. */
export const pageOf = (
  records: Iterable<TaskRecord>,
  request: ListRequest
): Either.Either<TaskPage, InvalidInput> =>
  Either.map(
    request.cursor === undefined ? Either.right(undefined) : decodeCursor(request.cursor),
    (after) => {
      const limit = Math.min(Math.max(request.limit ?? DefaultListLimit, 1), MaxListLimit)
      const sorted = [...records]
        .filter((record) => request.state === undefined || record.state === request.state)
        .filter(
          (record) =>
            after === undefined ||
            record.created_at < after[0] ||
            (record.created_at === after[0] && record.task_id < after[1])
        )
        .sort(newestFirst)
      const page = sorted.slice(0, limit)
      const last = page[page.length - 1]
      return {
        tasks: page.map(toSummary),
        next_cursor: sorted.length > limit && last ? encodeCursor(last.created_at, last.task_id) : null
      }
    }
  )

export const emptyStateCounts = (): Record<TaskState, number> => ({
  queued: 0,
  running: 0,
  complete: 0,
  failed: 0,
  cancelled: 0
})

export const claimantFor = (host: Host["Type"], workerId: string): Effect.Effect<Claimant> =>
  Effect.map(host.token, (owner_token) => ({
    worker_id: workerId,
    pid: host.pid,
    host: host.hostname,
    boot_id: host.bootId,
    owner_token
  }))
