/** Pieces every TaskStore implementation shares: paging, counting, the lease identity. */
import { Effect, Either, Option, Random, Ref } from "effect"
import { decodeCursor, encodeCursor } from "../domain/submission.js"
import type { TaskId } from "../domain/ids.js"
import type { AttemptReceipt } from "../domain/provider.js"
import type { Lease, TaskError, TaskRecord, TaskState, TaskSummary } from "../domain/Task.js"
import { submissionOrder, toSummary } from "../domain/Task.js"
import type { Claimant } from "../domain/transitions.js"
import * as Transitions from "../domain/transitions.js"
import type { InvalidInput, StaleAttempt } from "../domain/errors.js"
import { EchoProviderName, providerOfPayload } from "../domain/provider.js"
import type { Host } from "../services/Host.js"
import type {
  ClaimedTask,
  ClaimNextRequest,
  ClaimRequest,
  Heartbeat,
  ListRequest,
  SettledState,
  ReadyTask,
  TaskPage
} from "../services/TaskStore.js"

export const DefaultListLimit = 50
export const MaxListLimit = 500

/** Newest first: the reverse of submission order. */
export const newestFirst = (a: TaskRecord, b: TaskRecord): number => submissionOrder(b, a)

/** Whether a listed task passes a list request's filters (state, provider, search); not the cursor. */
const listMatcher = (request: ListRequest) => {
  const search =
    request.search === undefined || request.search === "" ? undefined : request.search.toLowerCase()
  return (
    task: { readonly state: TaskState; readonly client_request_id: string; readonly task_id: string },
    provider: string
  ): boolean =>
    (request.state === undefined || task.state === request.state) &&
    (request.provider === undefined || provider === request.provider) &&
    (search === undefined ||
      task.client_request_id.toLowerCase().includes(search) ||
      task.task_id.includes(search))
}

/** Whether a record passes a list request's filters (state, provider, search); not the cursor. */
export const listFilter = (request: ListRequest) => {
  const matches = listMatcher(request)
  return (record: TaskRecord): boolean => matches(record, providerOfPayload(record.payload))
}

/** `listFilter` for a summary, whose provider is null when the payload names none (the echo's). */
export const summaryFilter = (request: ListRequest) => {
  const matches = listMatcher(request)
  return (summary: TaskSummary): boolean => matches(summary, summary.provider ?? EchoProviderName)
}

/** The page size a list request asks for, within bounds. */
export const listLimit = (request: ListRequest): number =>
  Math.min(Math.max(request.limit ?? DefaultListLimit, 1), MaxListLimit)

/** One page of `records` (any order) for a list request. */
export const pageOf = (
  records: Iterable<TaskRecord>,
  request: ListRequest
): Either.Either<TaskPage, InvalidInput> =>
  Either.map(
    request.cursor === undefined ? Either.right(undefined) : decodeCursor(request.cursor),
    (after) => {
      const limit = listLimit(request)
      const sorted = [...records]
        .filter(listFilter(request))
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

/** How many of `records` are in each state. */
export const countStates = (
  records: ReadonlyArray<{ readonly state: TaskState }>
): Record<TaskState, number> => {
  const states = emptyStateCounts()
  for (const record of records) states[record.state] += 1
  return states
}

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
 * the file store under the task's lock with a durable write; PostgreSQL in a transaction that
 * holds the row.
 *
 * `onBusy`, when given, is the answer for a record another writer holds right now: a store
 * that can tell (PostgreSQL's SKIP LOCKED) answers it rather than wait. Claims use it, so
 * racing workers pass over each other's tasks instead of queueing behind them.
 */
export type ApplyStep<Fail> = <A, E>(
  taskId: TaskId,
  step: (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>,
  onBusy?: () => A
) => Effect.Effect<A, E | Fail>

/**
 * `open`, run by the first operation that needs it and remembered once it succeeds. A failure
 * is not remembered, so a later operation tries again (a store opens lazily: a command that
 * rejects its input before touching the store creates nothing, connects to nothing).
 */
export const onceSuccessful = <A, E, R>(
  open: Effect.Effect<A, E, R>
): Effect.Effect<Effect.Effect<A, E, R>> =>
  Effect.map(Effect.all([Ref.make(Option.none<A>()), Effect.makeSemaphore(1)]), ([opened, gate]) => {
    const first = Effect.flatMap(Ref.get(opened), (done) =>
      Option.isSome(done)
        ? Effect.succeed(done.value)
        : Effect.tap(open, (value) => Ref.set(opened, Option.some(value)))
    )
    return Effect.flatMap(Ref.get(opened), (done) =>
      Option.isSome(done) ? Effect.succeed(done.value) : gate.withPermits(1)(first)
    )
  })

/** The random draw of a backoff's jitter, in [0, 1). */
const settlement = Effect.map(Random.next, (jitter) => (now: number) => ({ now, jitter }))

/**
 * An outcome written under the fence; when the fence refuses it (the attempt lost its task),
 * what it reported is kept on its attempt as `late` and the writer gets StaleAttempt.
 */
const settle = <Fail>(apply: ApplyStep<Fail>, taskId: TaskId, lease: Lease, outcome: Transitions.Outcome) =>
  Effect.flatMap(settlement, (at) =>
    apply(
      taskId,
      (
        record,
        now
      ): Either.Either<readonly [TaskRecord | undefined, Either.Either<SettledState, StaleAttempt>], never> =>
        Either.right(
          Either.match(Transitions.finish(record, lease, outcome, at(now)), {
            onRight: (next) => [next, Either.right(settledState(next))] as const,
            onLeft: (stale) =>
              [Transitions.recordLate(record, lease, outcome, now), Either.left(stale)] as const
          })
        )
    ).pipe(Effect.flatMap((written) => written))
  )

/** The state an attempt's end left its task in. */
const settledState = (next: TaskRecord): SettledState => (next.state === "running" ? "queued" : next.state)

/** The state a reaped or released task is left in (never complete: nothing finished). */
const stateAfter = (next: TaskRecord): "queued" | "failed" | "cancelled" =>
  next.state === "queued" ? "queued" : next.state === "cancelled" ? "cancelled" : "failed"

/** Every transition of a live task: the same for every store. */
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
    return yield* apply(
      taskId,
      (record, now) => {
        // A claim run again after its commit was cut off finds its own lease: it did win.
        if (record.state === "running" && record.lease?.owner_token === claimant.owner_token)
          return Either.right([undefined, Option.some({ record, lease: record.lease })] as const)
        const next =
          request.accept === undefined || request.accept(record)
            ? Transitions.claim(record, claimant, now, request.leaseMillis, request.retry)
            : undefined
        const claimed: Option.Option<ClaimedTask> = next?.lease
          ? Option.some({ record: next, lease: next.lease })
          : Option.none()
        return Either.right([next, claimed] as const)
      },
      // Held by another writer: most likely another worker claiming it. Pass it over.
      (): Option.Option<ClaimedTask> => Option.none()
    )
  }),
  heartbeat: Effect.fn("TaskStore.heartbeat")((taskId: TaskId, lease: Lease, leaseMillis: number) =>
    apply(taskId, (record, now) =>
      Either.map(
        Transitions.heartbeat(record, lease, now, leaseMillis),
        (next): readonly [TaskRecord, Heartbeat] =>
          [
            next,
            { lease: next.lease ?? lease, cancelRequested: next.cancel_requested_at !== undefined }
          ] as const
      )
    )
  ),
  recordProcess: Effect.fn("TaskStore.recordProcess")((taskId: TaskId, lease: Lease, processGroup: number) =>
    apply(taskId, (record, now) =>
      Either.map(
        Transitions.recordProcess(record, lease, processGroup, now),
        (next) => [next, undefined] as const
      )
    )
  ),
  complete: Effect.fn("TaskStore.complete")(
    (taskId: TaskId, lease: Lease, result: unknown, receipt?: AttemptReceipt) =>
      settle(apply, taskId, lease, { _tag: "complete", result, receipt })
  ),
  fail: Effect.fn("TaskStore.fail")(
    (taskId: TaskId, lease: Lease, error: TaskError, receipt?: AttemptReceipt) =>
      settle(apply, taskId, lease, { _tag: "failed", error, receipt })
  ),
  stopCancelled: Effect.fn("TaskStore.stopCancelled")(
    (taskId: TaskId, lease: Lease, receipt?: AttemptReceipt) =>
      settle(apply, taskId, lease, { _tag: "cancelled", receipt })
  ),
  reap: Effect.fn("TaskStore.reap")((taskId: TaskId, lease: Lease, reason: Transitions.OrphanReason) =>
    Effect.flatMap(settlement, (at) =>
      apply(taskId, (record, now) =>
        Either.map(
          Transitions.reap(record, lease, reason, at(now)),
          (next) => [next, stateAfter(next)] as const
        )
      )
    )
  ),
  release: Effect.fn("TaskStore.release")((taskId: TaskId, lease: Lease) =>
    Effect.flatMap(settlement, (at) =>
      apply(taskId, (record, now) =>
        Either.map(Transitions.release(record, lease, at(now)), (next) => [next, stateAfter(next)] as const)
      )
    )
  )
})

/** Split queued records into those a worker may claim now and the earliest wait of the rest. */
export const readiness = (
  queued: ReadonlyArray<TaskRecord>,
  now: number
): { readonly ready: ReadonlyArray<ReadyTask>; readonly next_due_at: string | null } => {
  const ready: Array<ReadyTask> = []
  let next: string | null = null
  for (const record of queued) {
    if (Transitions.isDue(record, now))
      ready.push({ task_id: record.task_id, provider: providerOfPayload(record.payload) })
    else if (record.not_before !== undefined && (next === null || record.not_before < next))
      next = record.not_before
  }
  return { ready, next_due_at: next }
}

/**
 * The room a claim batch has left: in all, and for each capped provider. Pure bookkeeping
 * that every store's `claimNext` shares, so that caps mean the same everywhere.
 */
export interface ClaimRoom {
  readonly left: number
  readonly providers: ReadonlyMap<string, number>
}

export const claimRoomOf = (request: ClaimNextRequest): ClaimRoom => ({
  left: Math.max(0, request.limit),
  providers: request.room ?? new Map()
})

/** Whether one more task of `provider` fits. */
export const fitsRoom = (room: ClaimRoom, provider: string): boolean =>
  room.left > 0 && (room.providers.get(provider) ?? room.left) > 0

/** The room after one task of `provider` was claimed. */
export const takeRoom = (room: ClaimRoom, provider: string): ClaimRoom => {
  const capped = room.providers.get(provider)
  return {
    left: room.left - 1,
    providers: capped === undefined ? room.providers : new Map(room.providers).set(provider, capped - 1)
  }
}

/** The providers that can take nothing more: where a store can, it skips their tasks unread. */
export const fullProviders = (room: ClaimRoom): ReadonlyArray<string> =>
  [...room.providers].filter(([, left]) => left <= 0).map(([provider]) => provider)

/** One task claimed by `claimant` at `now`: `Transitions.claim` with the worker's policy. */
export const claimOne = (
  record: TaskRecord,
  claimant: Claimant,
  now: number,
  request: ClaimNextRequest
): ClaimedTask | undefined => {
  const next = Transitions.claim(record, claimant, now, request.leaseMillis, request.retry)
  return next?.lease ? { record: next, lease: next.lease } : undefined
}

/** A claim batch's tally of the waiting tasks it met. */
export const waitingTally = () => {
  let waiting = 0
  let next: string | null = null
  return {
    meet: (record: TaskRecord) => {
      waiting += 1
      if (record.not_before !== undefined && (next === null || record.not_before < next))
        next = record.not_before
    },
    result: () => ({ waiting, next_due_at: next })
  }
}
