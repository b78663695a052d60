/**
 * Rows of the tasks table: the record as JSON text, and copies of the fields that queries
 * filter and sort on. The record is the truth; a row whose copies disagree with it is damaged.
 */
import { Either, Option, Schema } from "effect"
import { InvalidRecord } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { isTaskId } from "../../domain/ids.js"
import { providerOfPayload } from "../../domain/provider.js"
import type { TaskRecord } from "../../domain/Task.js"
import { RetryPolicy } from "../../domain/Task.js"
import * as Transitions from "../../domain/transitions.js"
import { decodeRecordText } from "../records.js"
import type { PgTarget } from "./target.js"

export interface Row {
  readonly task_id: string
  readonly state: string
  readonly created_at: string
  readonly not_before: string | null
  readonly record: string
  /** Bumped by the database on every update (migration 4); as text, since it is a bigint. */
  readonly revision: string
  /** A claim written by the claim statement and not yet folded into `record` (migration 5). */
  readonly pending_claim: string | null
}

/** The columns of a Row, for `SELECT` and `RETURNING`. */
export const RowColumns =
  "task_id, state, created_at, not_before, record, revision::text AS revision, pending_claim"

/**
 * The inputs of `Transitions.claim` for one claimed row. The claim statement claims in SQL,
 * without the record in hand, so it stores these beside the record it left as it was; every
 * reader applies the pure claim to the record with them, and the row's next write stores the
 * claimed record in full and clears them. The claimed record is thus exactly what
 * `Transitions.claim` makes, whether it was claimed by id or by `claimNext`.
 */
const PendingClaim = Schema.Struct({
  worker_id: Schema.String,
  pid: Schema.Number,
  host: Schema.String,
  boot_id: Schema.String,
  now: Schema.Number,
  lease_ms: Schema.Number,
  retry: Schema.optional(RetryPolicy),
  owner_token: Schema.String
})
export type PendingClaim = typeof PendingClaim.Type
const decodePendingClaim = Schema.decodeUnknownEither(Schema.parseJson(PendingClaim))

/**
 * The text of a pending claim, cut before its owner token, which the claim statement appends
 * per row (`<head>"<token>"}`): one batch shares everything else. Tokens are hex, so quoting
 * them needs no escaping.
 */
export const pendingClaimHead = (claim: Omit<PendingClaim, "owner_token">): string =>
  `${JSON.stringify(claim).slice(0, -1)},"owner_token":`

/** The record a row holds: its stored record, with its pending claim applied. */
const withPendingClaim = (
  name: string,
  record: TaskRecord,
  pending: string | null
): Either.Either<TaskRecord, InvalidRecord> => {
  if (pending === null) return Either.right(record)
  const damaged = (reason: string) => Either.left(new InvalidRecord({ file: name, reason }))
  return Either.match(decodePendingClaim(pending), {
    onLeft: () => damaged("its pending claim is not a claim"),
    onRight: (claim) => {
      const claimed = Transitions.claim(record, claim, claim.now, claim.lease_ms, claim.retry)
      return claimed === undefined
        ? damaged(`its pending claim does not apply to a task that is ${record.state}`)
        : Either.right(claimed)
    }
  })
}

/** The row of `record` in `queue`, ready for `sql.insert`. */
export const rowOf = (queue: string, record: TaskRecord) => ({
  queue,
  task_id: record.task_id,
  state: record.state,
  created_at: record.created_at,
  not_before: record.not_before ?? null,
  provider: providerOfPayload(record.payload),
  record: JSON.stringify(record)
})

/** How a damaged row is named in reports: the target, then the task. */
export const rowName = (target: PgTarget, taskId: string) => `postgres ${target.display} task ${taskId}`

/** A row's record, or why it cannot be trusted. */
export const decodeRow = (
  target: PgTarget,
  row: Row,
  secret: Uint8Array
): Either.Either<TaskRecord, InvalidRecord> => {
  const name = rowName(target, row.task_id)
  if (!isTaskId(row.task_id))
    return Either.left(new InvalidRecord({ file: name, reason: "task_id is not a task id" }))
  const stored = decodeRecordText(name, row.record, row.task_id, secret)
  return Either.flatMap(
    Either.flatMap(stored, (record) => withPendingClaim(name, record, row.pending_claim)),
    (record) =>
      record.state !== row.state ||
      record.created_at !== row.created_at ||
      (record.not_before ?? null) !== row.not_before
        ? Either.left(
            new InvalidRecord({
              file: name,
              reason: "the row's state, created_at or not_before columns disagree with its record"
            })
          )
        : Either.right(record)
  )
}

/** One channel for every RelayKeep schema and queue; the payload says which. */
export const NotifyChannel = "relaykeep"

/** A NOTIFY payload: [schema, queue, task id or "" for "look again", the state the write left]. */
const Notice = Schema.parseJson(Schema.Tuple(Schema.String, Schema.String, Schema.String, Schema.String))
const encodeNotice = Schema.encodeSync(Notice)
const decodeNotice = Schema.decodeUnknownOption(Notice)

/** The notice of a write of `record`. */
export const noticeOf = (target: PgTarget, record: TaskRecord): string =>
  encodeNotice([target.schema, target.queue, record.task_id, record.state])

/** A notice that names no task: every worker of the queue should look at it again. */
export const lookAgainNotice = (target: PgTarget): string =>
  encodeNotice([target.schema, target.queue, "", "queued"])

/**
 * What a payload says to a listener of `target`: nothing (another queue's, or garbage), a
 * task and its state, or None for "look again".
 */
export const readNotice = (
  target: PgTarget,
  payload: string
): Option.Option<Option.Option<readonly [TaskId, string]>> =>
  Option.flatMap(decodeNotice(payload), ([schema, queue, taskId, state]) =>
    schema !== target.schema || queue !== target.queue
      ? Option.none()
      : Option.some(isTaskId(taskId) ? Option.some([taskId, state] as const) : Option.none())
  )
