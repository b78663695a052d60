/** Pieces every TaskStore implementation shares: paging, counting, the lease identity. */
import { Effect, Either, Option } from "effect"
import { decodeCursor, encodeCursor } from "../domain/submission.js"
import type { TaskId } from "../domain/ids.js"
import type { AttemptReceipt } from "../domain/provider.js"
import type { Lease, TaskError, TaskRecord, TaskState } from "../domain/Task.js"
import { submissionOrder, toSummary } from "../domain/Task.js"
import type { Claimant } from "../domain/transitions.js"
import * as Transitions from "../domain/transitions.js"
import type { InvalidInput } from "../domain/errors.js"
import type { Host } from "../services/Host.js"
import type { ClaimedTask, ClaimRequest, ListRequest, TaskPage } from "../services/TaskStore.js"

export const DefaultListLimit = 50
export const MaxListLimit = 500

/** Newest first: the reverse of submission order. */
export const newestFirst = (a: TaskRecord, b: TaskRecord): number => submissionOrder(b, a)

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

/**
 * How a store applies one step to one record atomically: read it, run `step`, write the new
 * record when the step returns one, and answer. The memory store does this in one `Ref.modify`;
 * the file store under the task's lock with a durable write.
 */
export type ApplyStep<Fail> = <A, E>(
  taskId: TaskId,
  step: (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>
) => Effect.Effect<A, E | Fail>

/** cancel, claim, heartbeat, complete and fail: the same transitions for every store. */
export const transitionOperations = <Fail>(host: Host["Type"], apply: ApplyStep<Fail>) => ({
  cancel: Effect.fn("TaskStore.cancel")((taskId: TaskId, sha: string) =>
    apply(taskId, (record, now) =>
      Either.map(Transitions.checkHash(record, sha), () => {
        const { next, outcome } = Transitions.cancel(record, now)
        return [next, outcome] as const
      })
    )
  ),
  claim: Effect.fn("TaskStore.claim")(function* (taskId: TaskId, request: ClaimRequest) {
    const claimant = yield* claimantFor(host, request.workerId)
    return yield* apply(taskId, (record, now) => {
      const next = Transitions.claim(record, claimant, now, request.leaseMillis)
      const claimed: Option.Option<ClaimedTask> = next?.lease
        ? Option.some({ record: next, lease: next.lease })
        : Option.none()
      return Either.right([next, claimed] as const)
    })
  }),
  heartbeat: Effect.fn("TaskStore.heartbeat")((taskId: TaskId, lease: Lease, leaseMillis: number) =>
    apply(taskId, (record, now) =>
      Either.map(
        Transitions.heartbeat(record, lease, now, leaseMillis),
        (next) => [next, next.lease ?? lease] as const
      )
    )
  ),
  complete: Effect.fn("TaskStore.complete")(
    (taskId: TaskId, lease: Lease, result: unknown, receipt?: AttemptReceipt) =>
      apply(taskId, (record, now) =>
        Either.map(
          Transitions.finish(record, lease, { _tag: "complete", result, receipt }, now),
          (next) => [next, undefined] as const
        )
      )
  ),
  fail: Effect.fn("TaskStore.fail")(
    (taskId: TaskId, lease: Lease, error: TaskError, receipt?: AttemptReceipt) =>
      apply(taskId, (record, now) =>
        Either.map(
          Transitions.finish(record, lease, { _tag: "failed", error, receipt }, now),
          (next) => [next, undefined] as const
        )
      )
  )
})
