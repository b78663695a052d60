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
import type { CancelOutcome, JsonObject, Lease, Receipt, TaskError, TaskRecord } from "./Task.js"
import { isoTime, timeMillis, toReceipt } from "./Task.js"

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
  attempts: []
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
 * Why a decoded record cannot be trusted, or undefined when it agrees with itself:
 * its id must be the one it is stored under and its payload must still match its hash.
 */
export const recordDefect = (record: TaskRecord, storedUnder: TaskId): string | undefined => {
  if (record.task_id !== storedUnder)
    return `task_id ${record.task_id} does not match its name ${storedUnder}`
  if (payloadSha256(record.payload) !== record.payload_sha256) return "payload does not match payload_sha256"
  if ((record.state === "running") !== (record.lease !== null))
    return `state ${record.state} disagrees with lease`
  return undefined
}

/** `queued → cancelled`; cancelled stays cancelled; anything else is reported unchanged. */
export const cancel = (
  record: TaskRecord,
  now: number
): { readonly next: TaskRecord | undefined; readonly outcome: CancelOutcome } => {
  switch (record.state) {
    case "queued": {
      const next: TaskRecord = {
        ...record,
        state: "cancelled",
        updated_at: isoTime(now),
        finished_at: isoTime(now)
      }
      return { next, outcome: { task_id: record.task_id, cancelled: true, state: "cancelled" } }
    }
    case "cancelled":
      return { next: undefined, outcome: { task_id: record.task_id, cancelled: true, state: "cancelled" } }
    default:
      return { next: undefined, outcome: { task_id: record.task_id, cancelled: false, state: record.state } }
  }
}

/** Who is claiming: the worker's identity and a fresh token that fences this attempt. */
export interface Claimant {
  readonly worker_id: string
  readonly pid: number
  readonly host: string
  readonly boot_id: string
  readonly owner_token: string
}

/** `queued → running` under a new attempt and lease, or undefined when the task is not queued. */
export const claim = (
  record: TaskRecord,
  claimant: Claimant,
  now: number,
  leaseMillis: number
): TaskRecord | undefined => {
  if (record.state !== "queued") return undefined
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
    ...record,
    state: "running",
    attempt,
    lease,
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

export type Outcome =
  | { readonly _tag: "complete"; readonly result: unknown; readonly receipt?: AttemptReceipt | undefined }
  | { readonly _tag: "failed"; readonly error: TaskError; readonly receipt?: AttemptReceipt | undefined }

/** `running → complete | failed`, fenced by the lease of the attempt that ran. */
export const finish = (
  record: TaskRecord,
  lease: Lease,
  outcome: Outcome,
  now: number
): Either.Either<TaskRecord, StaleAttempt> =>
  Either.map(fence(record, lease), () => {
    const error = outcome._tag === "failed" ? outcome.error : null
    return {
      ...record,
      state: outcome._tag,
      lease: null,
      result: outcome._tag === "complete" ? outcome.result : null,
      error,
      updated_at: isoTime(now),
      finished_at: isoTime(now),
      attempts: record.attempts.map((attempt) =>
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
    }
  })

export type LeaseStatus =
  | { readonly _tag: "live" }
  | { readonly _tag: "orphaned"; readonly reason: "lease_expired" | "owner_dead" | "owner_rebooted" }

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
