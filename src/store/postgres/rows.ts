/**
 * Rows of the tasks table: the record as JSON text, its payload as JSON text of its own (since
 * migration 6), and copies of the fields that queries filter and sort on. The record and the
 * payload are the truth; a row whose copies disagree with them is damaged.
 *
 * The payload is kept apart because it never changes after the insert, while the rest of the
 * record changes with every heartbeat, outcome and reap: a write stores the record without its
 * payload, and the reads of a worker (its cancel poll, reaping) leave the payload column out, so
 * that a large prompt crosses the wire at its submission, at its claim, and when someone reads it,
 * never on a worker's hot path. A row written before migration 6 holds its payload in its record
 * and none in the column (`payload_missing`); its next write, which knows that from the row it
 * read, sends the payload once to fill the column.
 */
import { Either, Option, Schema } from "effect"
import { canonicalJson } from "../../domain/canonical.js"
import { InvalidRecord } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { isTaskId } from "../../domain/ids.js"
import { providerOfPayload } from "../../domain/provider.js"
import type { RecordHead, TaskRecord } from "../../domain/Task.js"
import { headOf, RetryPolicy } from "../../domain/Task.js"
import * as Transitions from "../../domain/transitions.js"
import { decodeHeadJson, decodeRecordJson, parseRecordText } from "../records.js"
import type { PgTarget } from "./target.js"

/** A row as a worker reads it: everything but the payload. */
export interface HeadRow {
  readonly task_id: string
  readonly state: string
  readonly created_at: string
  readonly not_before: string | null
  /** The record without its payload, or (written before migration 6) with it. */
  readonly record: string
  /** Bumped by the database on every update (migration 4); as text, since it is a bigint. */
  readonly revision: string
  /** A claim written by the claim statement and not yet folded into `record` (migration 5). */
  readonly pending_claim: string | null
  /** The payload column is empty: the record holds the payload (a row written before migration 6). */
  readonly payload_missing: boolean
}

export interface Row extends HeadRow {
  /** The payload's JSON text (migration 6); null when the record holds the payload itself. */
  readonly payload: string | null
}

/** The columns of a HeadRow, for `SELECT` and `RETURNING`. */
export const HeadColumns =
  "task_id, state, created_at, not_before, record, revision::text AS revision, pending_claim, payload IS NULL AS payload_missing"

/** The columns of a Row. */
export const RowColumns = `${HeadColumns}, payload`

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

/**
 * The record a row holds: its stored record, with its pending claim applied. A claim reads and
 * writes no payload, so a record read without one is claimed the same way (with an empty
 * payload that is dropped again).
 */
const withPendingClaim = <R extends RecordHead>(
  name: string,
  record: R,
  pending: string | null,
  withPayload: (head: RecordHead) => R
): Either.Either<R, InvalidRecord> => {
  if (pending === null) return Either.right(record)
  const damaged = (reason: string) => Either.left(new InvalidRecord({ file: name, reason }))
  return Either.match(decodePendingClaim(pending), {
    onLeft: () => damaged("its pending claim is not a claim"),
    onRight: (claim) => {
      const claimed = Transitions.claim(
        { ...record, payload: {} },
        claim,
        claim.now,
        claim.lease_ms,
        claim.retry
      )
      return claimed === undefined
        ? damaged(`its pending claim does not apply to a task that is ${record.state}`)
        : Either.right(withPayload(headOf(claimed)))
    }
  })
}

/** The row of `record` in `queue`, ready for `sql.insert`: the payload in a column of its own. */
export const rowOf = (queue: string, record: TaskRecord) => ({
  queue,
  task_id: record.task_id,
  state: record.state,
  created_at: record.created_at,
  not_before: record.not_before ?? null,
  provider: providerOfPayload(record.payload),
  record: JSON.stringify(headOf(record)),
  payload: JSON.stringify(record.payload)
})

/** How a damaged row is named in reports: the target, then the task. */
export const rowName = (target: PgTarget, taskId: string) => `postgres ${target.display} task ${taskId}`

/** A row's columns that copy its record, checked against it. */
const columnsAgree = <R extends RecordHead>(
  name: string,
  row: HeadRow,
  record: R
): Either.Either<R, InvalidRecord> =>
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

/** A row whose task_id column is no task id: nothing in it can be trusted. */
const notATaskId = (name: string) =>
  Either.left(new InvalidRecord({ file: name, reason: "task_id is not a task id" }))

/** A row's record, payload included, or why it cannot be trusted. */
export const decodeRow = (
  target: PgTarget,
  row: Row,
  secret: Uint8Array
): Either.Either<TaskRecord, InvalidRecord> => {
  const name = rowName(target, row.task_id)
  const taskId = row.task_id
  if (!isTaskId(taskId)) return notATaskId(name)
  const damaged = (reason: string) => Either.left(new InvalidRecord({ file: name, reason }))
  const stored = Either.flatMap(parseRecordText(name, row.record), (json) => {
    const { payload } = row
    // No payload column (a row from before migration 6), or no object to put it in (damage the
    // decoder names): the record alone.
    if (payload === null || !isJsonObject(json)) return decodeRecordJson(name, json, taskId, secret)
    return Either.flatMap(
      Either.mapLeft(
        parseRecordText(name, payload),
        (error) => new InvalidRecord({ file: name, reason: `its payload column is ${error.reason}` })
      ),
      (parsed) =>
        // A record written whole (by a relaykeep older than version 6, still running through an
        // upgrade) holds the payload too: readable while the two are the same payload.
        "payload" in json && !samePayload(json["payload"], parsed)
          ? damaged("the payload its record holds disagrees with its payload column")
          : decodeRecordJson(name, { ...json, payload: parsed }, taskId, secret)
    )
  })
  return Either.flatMap(
    Either.flatMap(stored, (record) =>
      withPendingClaim(name, record, row.pending_claim, (head) => ({ ...head, payload: record.payload }))
    ),
    (record) => columnsAgree(name, row, record)
  )
}

/**
 * A row's record without its payload, or why it cannot be trusted: every check of `decodeRow`
 * but the payload's hash, which is for the reads that return the payload.
 */
export const decodeHeadRow = (
  target: PgTarget,
  row: HeadRow,
  secret: Uint8Array
): Either.Either<RecordHead, InvalidRecord> => {
  const name = rowName(target, row.task_id)
  const taskId = row.task_id
  if (!isTaskId(taskId)) return notATaskId(name)
  return Either.flatMap(
    Either.flatMap(
      Either.flatMap(parseRecordText(name, row.record), (json) => decodeHeadJson(name, json, taskId, secret)),
      (head) => withPendingClaim(name, head, row.pending_claim, (claimed) => claimed)
    ),
    (head) => columnsAgree(name, row, head)
  )
}

/** Whether two parsed payloads are the same JSON value (canonical forms equal). */
const samePayload = (a: unknown, b: unknown): boolean => {
  try {
    return canonicalJson(a) === canonicalJson(b)
  } catch {
    return false
  }
}

/** Whether parsed JSON is an object (not null, not an array). */
export const isJsonObject = (value: unknown): value is { readonly [key: string]: unknown } =>
  value !== null && typeof value === "object" && !Array.isArray(value)

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
