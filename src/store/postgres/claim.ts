/**
 * The claim statement of the PostgreSQL store: one round trip that picks the oldest ready
 * rows, claims them and announces them (docs/scaling.md). The claimed records are what
 * `Transitions.claim` makes of the stored ones with the inputs the statement leaves in
 * `pending_claim` (rows.ts), applied by every reader.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import type * as Statement from "@effect/sql/Statement"
import { isoTime, submissionOrder } from "../../domain/Task.js"
import type { ClaimRoom } from "../shared.js"
import type { Row } from "./rows.js"
import { lookAgainNotice, NotifyChannel } from "./rows.js"
import type { PgTarget } from "./target.js"

/** What one round claims with. */
export interface ClaimRound {
  readonly room: ClaimRoom
  readonly now: number
  /** The pending claim's text up to its owner token (rows.ts, pendingClaimHead). */
  readonly head: string
  /** One lease token per claim, in submission order of the claimed rows. */
  readonly tokens: ReadonlyArray<string>
  /** Rows an earlier round met damaged and put back. */
  readonly passed: ReadonlyArray<string>
}

/** A row of the claim statement: a claimed row (all null when none was), and the waiting count. */
export interface ClaimRow {
  readonly task_id: string | null
  readonly state: string | null
  readonly created_at: string | null
  readonly not_before: string | null
  readonly record: string | null
  readonly payload: string | null
  readonly revision: string | null
  readonly pending_claim: string | null
  /** What `not_before` was before the claim, to put a damaged row back as it was. */
  readonly was_not_before: string | null
  readonly waiting: number
  readonly next_due_at: string | null
}

/** Submission order of rows (their columns are "C"-collated, as JavaScript compares). */
export const bySubmission = (a: Row, b: Row): number => submissionOrder(a, b)

/** The claimed row, when the claim statement's row holds one. */
export const claimedRow = (row: ClaimRow): Row | undefined =>
  row.task_id === null ||
  row.state === null ||
  row.created_at === null ||
  row.record === null ||
  row.revision === null
    ? undefined
    : {
        task_id: row.task_id,
        state: row.state,
        created_at: row.created_at,
        not_before: row.not_before,
        record: row.record,
        payload: row.payload,
        revision: row.revision,
        pending_claim: row.pending_claim,
        payload_missing: row.payload === null
      }

/**
 * One claim round in one statement: the next ready rows, oldest first, locked and skipping
 * rows other transactions hold (one `ORDER BY … LIMIT` per provider with room left, one
 * for every other provider, each over an index that serves it, then the oldest `room.left`
 * of them), moved to running with their claim's inputs stored beside the record
 * (rows.ts, PendingClaim), each announced; and the count of tasks waiting out a backoff,
 * from the same snapshot. Always one row; `task_id` is null when nothing was claimed.
 *
 * With caps, the parts together may lock more rows than the round takes, and for as long as
 * the statement runs a rival claim skips those rows as taken. So that the rival does not then
 * sleep until its poll with ready work in the queue, such a round also sends the notice that
 * tells every worker of the queue to look again (once, when it commits).
 */
export const claimRound = (sql: PgClient.PgClient, target: PgTarget, round: ClaimRound) => {
  const { room, now, head, tokens, passed } = round
  const tasks = `${target.schema}.tasks`
  const nowText = isoTime(now)
  const capped = [...room.providers.keys()]
  const ready = (filter: Statement.Fragment, take: number) => sql`(
    SELECT task_id, created_at, not_before FROM ${sql(tasks)}
    WHERE queue = ${target.queue} AND state = 'queued' AND ${filter}
      AND (not_before IS NULL OR not_before <= ${nowText})
      ${passed.length === 0 ? sql.literal("") : sql`AND task_id NOT IN ${sql.in(passed)}`}
    ORDER BY created_at, task_id
    LIMIT ${take}
    FOR UPDATE SKIP LOCKED)`
  const parts = [
    ...[...room.providers]
      .filter(([, left]) => left > 0)
      .map(([provider, left]) => ready(sql`provider = ${provider}`, Math.min(left, room.left))),
    ready(
      capped.length === 0 ? sql.literal("true") : sql`coalesce(provider, '') NOT IN ${sql.in(capped)}`,
      room.left
    )
  ]
  const picks = parts.map((part, index) => sql`${sql.literal(`pick${index}`)} AS ${part}`)
  const union = sql.join(
    " UNION ALL ",
    false
  )(parts.map((_, index) => sql`SELECT * FROM ${sql.literal(`pick${index}`)}`))
  // One part locks no more than it picks; several may lock rows that none of them takes.
  const surplus =
    parts.length === 1
      ? sql.literal("")
      : sql`, CASE WHEN (SELECT count(*) FROM (${union}) AS locked) > (SELECT count(*) FROM picked)
          THEN pg_notify(${NotifyChannel}, ${lookAgainNotice(target)})::text END AS looked_again`
  return sql<ClaimRow>`
    WITH ${sql.csv(picks)},
    picked AS (
      SELECT task_id, not_before, row_number() OVER (ORDER BY created_at, task_id) AS n
      FROM (${union}) AS ready
      ORDER BY created_at, task_id
      LIMIT ${room.left}
    ),
    claimed AS (
      UPDATE ${sql(tasks)} AS t SET state = 'running', not_before = NULL,
        pending_claim = ${head} || '"' || (${JSON.stringify(tokens)}::json ->> (picked.n - 1)::int) || '"}'
      FROM picked
      WHERE t.queue = ${target.queue} AND t.task_id = picked.task_id
      RETURNING t.task_id, t.state, t.created_at, t.not_before, t.record, t.payload,
        t.revision::text AS revision, t.pending_claim, picked.not_before AS was_not_before
    ),
    waiting AS (
      SELECT count(*)::int AS waiting, min(not_before) AS next_due_at FROM ${sql(tasks)}
      WHERE queue = ${target.queue} AND state = 'queued' AND not_before IS NOT NULL
        AND not_before > ${nowText}
    )
    SELECT claimed.*, waiting.waiting, waiting.next_due_at,
      CASE WHEN claimed.task_id IS NULL THEN NULL ELSE pg_notify(${NotifyChannel},
        json_build_array(${target.schema}::text, ${target.queue}::text, claimed.task_id, 'running')::text
      )::text END AS notified ${surplus}
    FROM waiting LEFT JOIN claimed ON true`
}

/**
 * The rows claimed under one of `tokens`: what a claim run again after a failure looks for
 * first, since a commit whose reply was lost claimed them and the worker never learned it.
 * Found by the owner token that ends each pending claim (rows.ts, pendingClaimHead); their
 * `not_before` from before the claim is not known, so a damaged one is put back ready.
 */
export const claimedWith = (sql: PgClient.PgClient, target: PgTarget, tokens: ReadonlyArray<string>) =>
  sql<ClaimRow>`
    SELECT task_id, state, created_at, not_before, record, payload, revision::text AS revision, pending_claim,
      NULL::text AS was_not_before, 0 AS waiting, NULL::text AS next_due_at
    FROM ${sql(`${target.schema}.tasks`)}
    WHERE queue = ${target.queue} AND state = 'running' AND pending_claim IS NOT NULL
      AND substring(pending_claim from '"owner_token":"([^"]*)"}$') IN ${sql.in(tokens)}`
