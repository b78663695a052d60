/**
 * The task state machine as pure functions. Every TaskStore applies these, so the memory,
 * file and PostgreSQL stores cannot drift apart in what a submit, claim or outcome means.
 */
import { Either } from "effect"
import { canonicalJson, hmacSha256Hex, sha256Hex } from "./canonical.js"
import { ConflictError, HashMismatch, StaleAttempt } from "./errors.js"
import type { ClientRequestId } from "./ids.js"
import type { AttemptReceipt } from "./provider.js"
import { PayloadSha256, TaskId } from "./ids.js"
import type {
  CancelOutcome,
  JsonObject,
  LateOutcome,
  Lease,
  Receipt,
  RecordHead,
  RetryPolicy,
  TaskError,
  TaskRecord,
  TaskState
} from "./Task.js"
import { DefaultRetryPolicy, isoTime, timeMillis, toReceipt } from "./Task.js"

export const payloadSha256 = (payload: JsonObject): PayloadSha256 =>
  PayloadSha256.make(sha256Hex(canonicalJson(payload)))

/** The keyed task id: nobody without the root's secret can derive a task id from a request id. */
export const taskIdFor = (secret: Uint8Array, clientRequestId: ClientRequestId): TaskId =>
  TaskId.make(hmacSha256Hex(secret, clientRequestId))

export const newRecord = (input: {
  readonly taskId: TaskId
  readonly clientRequestId: ClientRequestId
  readonly payload: JsonObject
  readonly payloadSha256: PayloadSha256
  readonly now: number
  readonly ttlMillis?: number | null | undefined
}): TaskRecord => ({
  schema_version: 1,
  task_id: input.taskId,
  client_request_id: input.clientRequestId,
  payload_sha256: input.payloadSha256,
  payload: input.payload,
  state: "queued",
  created_at: isoTime(input.now),
  updated_at: isoTime(input.now),
  started_at: null,
  finished_at: null,
  attempt: 0,
  lease: null,
  result: null,
  error: null,
  attempts: [],
  ...(input.ttlMillis === undefined ? {} : { ttl_ms: input.ttlMillis })
})

/** A resubmission: the stored receipt when the payload is the same, a conflict otherwise. */
export const resubmit = (existing: TaskRecord, sha: PayloadSha256): Either.Either<Receipt, ConflictError> =>
  existing.payload_sha256 === sha
    ? Either.right(toReceipt(existing))
    : Either.left(
        new ConflictError({ taskId: existing.task_id, clientRequestId: existing.client_request_id })
      )

export const checkHash = (record: TaskRecord, sha: string): Either.Either<TaskRecord, HashMismatch> =>
  record.payload_sha256 === sha
    ? Either.right(record)
    : Either.left(new HashMismatch({ taskId: record.task_id }))

/**
 * Why a decoded record cannot be trusted, or undefined when it agrees with itself: its id must
 * be the one it is stored under and the keyed hash of its request id, and its payload must
 * still match its hash.
 */
export const recordDefect = (
  record: TaskRecord,
  storedUnder: TaskId,
  secret: Uint8Array
): string | undefined =>
  headDefect(record, storedUnder, secret) ??
  (payloadSha256(record.payload) !== record.payload_sha256
    ? "payload does not match payload_sha256"
    : undefined)

/** `recordDefect` of a record read without its payload: every check but the payload's hash. */
export const headDefect = (
  record: RecordHead,
  storedUnder: TaskId,
  secret: Uint8Array
): string | undefined => {
  if (record.task_id !== storedUnder)
    return `task_id ${record.task_id} does not match its name ${storedUnder}`
  // Only the root's secret makes a task id from a request id: a record that fails this was not
  // written by this store (planted, or copied from another root) and is never dispatched.
  if (taskIdFor(secret, record.client_request_id) !== record.task_id)
    return "task_id is not the keyed hash of client_request_id under this store's secret (planted, or copied from another store)"
  if ((record.state === "running") !== (record.lease !== null))
    return `state ${record.state} disagrees with lease`
  return undefined
}

/**
 * `queued → cancelled` at once. A running task records the request (once) and stays running
 * until its worker stops it; cancelled stays cancelled; any other state is reported unchanged.
 */
export const cancel = (
  record: TaskRecord,
  now: number
): { readonly next: TaskRecord | undefined; readonly outcome: CancelOutcome } => {
  const outcome = (cancelled: boolean, cancelRequested: boolean, state: TaskState): CancelOutcome => ({
    task_id: record.task_id,
    cancelled,
    cancel_requested: cancelRequested,
    state
  })
  switch (record.state) {
    case "queued": {
      const next: TaskRecord = {
        ...withoutSchedule(record),
        state: "cancelled",
        updated_at: isoTime(now),
        finished_at: isoTime(now)
      }
      return { next, outcome: outcome(true, false, "cancelled") }
    }
    case "running": {
      const next: TaskRecord | undefined =
        record.cancel_requested_at === undefined
          ? { ...record, cancel_requested_at: isoTime(now), updated_at: isoTime(now) }
          : undefined
      return { next, outcome: outcome(false, true, "running") }
    }
    case "cancelled":
      return { next: undefined, outcome: outcome(true, false, "cancelled") }
    default:
      return { next: undefined, outcome: outcome(false, false, record.state) }
  }
}

/** The record without its wait (`not_before`): claimed, cancelled or finished tasks wait for nothing. */
const withoutSchedule = (record: TaskRecord): TaskRecord => {
  const { not_before: _notBefore, ...rest } = record
  return rest
}

/** The record without a pending cancel request: a requeued task starts afresh. */
const withoutCancelRequest = (record: TaskRecord): TaskRecord => {
  const { cancel_requested_at: _requested, ...rest } = record
  return rest
}

/** Who is claiming: the worker's identity and a fresh token that fences this attempt. */
export interface Claimant {
  readonly worker_id: string
  readonly pid: number
  readonly host: string
  readonly boot_id: string
  readonly owner_token: string
}

/** Whether a queued task may be claimed at `now`: a requeued task waits out its backoff. */
export const isDue = (record: TaskRecord, now: number): boolean =>
  record.state === "queued" && (record.not_before === undefined || timeMillis(record.not_before) <= now)

/**
 * `queued → running` under a new attempt and lease, stamped with the claiming worker's retry
 * policy; undefined when the task is not queued or still waits out a backoff.
 */
export const claim = (
  record: TaskRecord,
  claimant: Claimant,
  now: number,
  leaseMillis: number,
  policy: RetryPolicy = DefaultRetryPolicy
): TaskRecord | undefined => {
  if (!isDue(record, now)) return undefined
  const attempt = record.attempt + 1
  const lease: Lease = {
    owner_token: claimant.owner_token,
    worker_id: claimant.worker_id,
    pid: claimant.pid,
    host: claimant.host,
    boot_id: claimant.boot_id,
    attempt,
    claimed_at: isoTime(now),
    expires_at: isoTime(now + leaseMillis)
  }
  return {
    ...withoutSchedule(record),
    state: "running",
    attempt,
    lease,
    retry: policy,
    error: null,
    updated_at: isoTime(now),
    started_at: isoTime(now),
    attempts: [
      ...record.attempts,
      {
        attempt,
        worker_id: claimant.worker_id,
        pid: claimant.pid,
        host: claimant.host,
        started_at: isoTime(now),
        ended_at: null,
        outcome: "running",
        error: null
      }
    ]
  }
}

/** The fence: a write on behalf of `lease` is allowed only while that lease is the task's current one. */
export const fence = (record: TaskRecord, lease: Lease): Either.Either<Lease, StaleAttempt> => {
  const stale = (reason: string) =>
    Either.left(new StaleAttempt({ taskId: record.task_id, attempt: lease.attempt, reason }))
  if (record.state !== "running") return stale(`task is ${record.state}`)
  if (record.lease === null || record.attempt !== lease.attempt)
    return stale(`task is at attempt ${record.attempt}`)
  if (record.lease.owner_token !== lease.owner_token) return stale("the lease belongs to another owner")
  return Either.right(record.lease)
}

export const heartbeat = (
  record: TaskRecord,
  lease: Lease,
  now: number,
  leaseMillis: number
): Either.Either<TaskRecord, StaleAttempt> =>
  Either.map(fence(record, lease), (current) => ({
    ...record,
    updated_at: isoTime(now),
    lease: { ...current, expires_at: isoTime(now + leaseMillis) }
  }))

/** Note the process group of the running attempt of `lease` (fenced like a heartbeat). */
export const recordProcess = (
  record: TaskRecord,
  lease: Lease,
  processGroup: number,
  now: number
): Either.Either<TaskRecord, StaleAttempt> =>
  Either.map(fence(record, lease), () => ({
    ...record,
    updated_at: isoTime(now),
    attempts: record.attempts.map((attempt) =>
      attempt.attempt === lease.attempt ? { ...attempt, process_group: processGroup } : attempt
    )
  }))

export type Outcome =
  | { readonly _tag: "complete"; readonly result: unknown; readonly receipt?: AttemptReceipt | undefined }
  | { readonly _tag: "failed"; readonly error: TaskError; readonly receipt?: AttemptReceipt | undefined }
  | { readonly _tag: "cancelled"; readonly receipt?: AttemptReceipt | undefined }

/**
 * The wait before attempt `attempt + 1`: exponential from the policy's initial delay, capped at
 * its maximum, with "equal jitter": uniformly between half the nominal delay and all of it.
 * `jitter` is a number in [0, 1).
 */
export const backoffMillis = (policy: RetryPolicy, attempt: number, jitter: number): number => {
  const nominal = Math.min(policy.backoff_max_ms, policy.backoff_initial_ms * 2 ** Math.max(attempt - 1, 0))
  return Math.round((nominal * (1 + Math.min(Math.max(jitter, 0), 1))) / 2)
}

/** How an attempt's end is settled: when, and the random draw its backoff uses. */
export interface Settlement {
  readonly now: number
  readonly jitter: number
  /** Requeue without a backoff (the worker shut down: nothing was wrong with the task). */
  readonly immediate?: boolean
}

/**
 * `running → complete | failed | cancelled | queued`, fenced by the lease of the attempt that
 * ran. A failure goes back to the queue (after a backoff) when its error is retryable, the
 * task has attempts left under its policy and nobody asked to cancel it; a failure of a task
 * whose cancel was requested ends `cancelled`.
 */
export const finish = (
  record: TaskRecord,
  lease: Lease,
  outcome: Outcome,
  settlement: Settlement
): Either.Either<TaskRecord, StaleAttempt> =>
  Either.map(fence(record, lease), () => {
    const { now } = settlement
    const error = outcome._tag === "failed" ? outcome.error : null
    const policy = record.retry ?? DefaultRetryPolicy
    const cancelRequested = record.cancel_requested_at !== undefined
    const retry =
      outcome._tag === "failed" &&
      outcome.error.retryable === true &&
      !cancelRequested &&
      record.attempt < policy.max_attempts
    const attempts = record.attempts.map((attempt) =>
      attempt.attempt === lease.attempt
        ? {
            ...attempt,
            ended_at: isoTime(now),
            outcome: outcome._tag,
            error,
            ...(outcome.receipt === undefined ? {} : { receipt: outcome.receipt })
          }
        : attempt
    )
    if (retry) {
      const wait = settlement.immediate ? 0 : backoffMillis(policy, record.attempt, settlement.jitter)
      return {
        ...record,
        state: "queued" as const,
        lease: null,
        result: null,
        error: null,
        updated_at: isoTime(now),
        attempts,
        ...(wait > 0 ? { not_before: isoTime(now + wait) } : {})
      }
    }
    const state = outcome._tag === "failed" && cancelRequested ? ("cancelled" as const) : outcome._tag
    return {
      ...withoutCancelRequest(withoutSchedule(record)),
      ...(cancelRequested ? { cancel_requested_at: record.cancel_requested_at } : {}),
      state,
      lease: null,
      result: outcome._tag === "complete" ? outcome.result : null,
      error,
      updated_at: isoTime(now),
      finished_at: isoTime(now),
      attempts
    }
  })

/** The error tag of an attempt whose worker was lost (reaped). */
export const WorkerLost = "worker_lost"

/**
 * What a worker that lost its task reported anyway: kept on its attempt as `late` (once), never
 * as the task's result. Undefined when there is nothing to keep: no such attempt, an attempt
 * that was not reaped (it ended itself), or one whose late outcome is already kept.
 */
export const recordLate = (
  record: TaskRecord,
  lease: Lease,
  outcome: Outcome,
  now: number
): TaskRecord | undefined => {
  const attempt = record.attempts.find((entry) => entry.attempt === lease.attempt)
  // Only an attempt that was reaped lost its task while its worker went on; a second outcome
  // from an attempt that ended itself is a duplicate, not news.
  if (attempt === undefined || attempt.late !== undefined || attempt.error?.tag !== WorkerLost)
    return undefined
  const late: LateOutcome = {
    outcome: outcome._tag,
    reported_at: isoTime(now),
    ...(outcome._tag === "complete" ? { result: outcome.result } : {}),
    ...(outcome._tag === "failed" ? { error: outcome.error } : {}),
    ...(outcome.receipt === undefined ? {} : { receipt: outcome.receipt })
  }
  return {
    ...record,
    updated_at: isoTime(now),
    attempts: record.attempts.map((entry) => (entry === attempt ? { ...entry, late } : entry))
  }
}

export type OrphanReason = "lease_expired" | "owner_dead" | "owner_rebooted"

const orphanText: Record<OrphanReason, string> = {
  lease_expired: "its lease expired",
  owner_dead: "its process is gone",
  owner_rebooted: "its machine restarted"
}

/**
 * Reap an orphan: end the attempt of `lease` as lost (`worker_lost`, retryable), so the task
 * goes back to the queue while attempts remain, else ends `failed` (or `cancelled` when a
 * cancel was requested). Fenced like an outcome, and a lease found expired must still be
 * expired: a heartbeat in between wins.
 */
export const reap = (
  record: TaskRecord,
  lease: Lease,
  reason: OrphanReason,
  settlement: Settlement
): Either.Either<TaskRecord, StaleAttempt> =>
  Either.flatMap(fence(record, lease), (current) =>
    reason === "lease_expired" && timeMillis(current.expires_at) > settlement.now
      ? Either.left(
          new StaleAttempt({
            taskId: record.task_id,
            attempt: lease.attempt,
            reason: "the lease was renewed"
          })
        )
      : finish(
          record,
          lease,
          {
            _tag: "failed",
            error: {
              tag: WorkerLost,
              message: `worker ${current.worker_id} (pid ${current.pid} on ${current.host}) was lost: ${orphanText[reason]}`,
              retryable: true
            }
          },
          settlement
        )
  )

/**
 * Give a task back at shutdown: the attempt ends with `shutdown` (retryable, no backoff), so
 * the task is queued again while attempts remain and ends `failed` otherwise.
 */
export const release = (
  record: TaskRecord,
  lease: Lease,
  settlement: Settlement
): Either.Either<TaskRecord, StaleAttempt> =>
  finish(
    record,
    lease,
    {
      _tag: "failed",
      error: {
        tag: "shutdown",
        message: "the worker shut down before the attempt finished; its processes were stopped",
        retryable: true
      }
    },
    { ...settlement, immediate: true }
  )

export type LeaseStatus =
  { readonly _tag: "live" } | { readonly _tag: "orphaned"; readonly reason: OrphanReason }

/**
 * Whether a running task's holder may still be working on it. `ownerAlive` is the answer of
 * this host's process table for the lease's pid, asked only when the lease names this host.
 */
export const leaseStatus = (
  lease: Lease,
  now: number,
  here: { readonly host: string; readonly boot_id: string },
  ownerAlive: boolean
): LeaseStatus => {
  if (lease.host === here.host && lease.boot_id !== here.boot_id)
    return { _tag: "orphaned", reason: "owner_rebooted" }
  if (lease.host === here.host && !ownerAlive) return { _tag: "orphaned", reason: "owner_dead" }
  if (timeMillis(lease.expires_at) <= now) return { _tag: "orphaned", reason: "lease_expired" }
  return { _tag: "live" }
}
