/**
 * How the PostgreSQL store applies a transition: in one fenced statement when it can, in a
 * transaction that holds the row when it must (docs/scaling.md). Either way the step is a
 * pure transition of `domain/transitions.ts`, run on the row's current record.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import { Clock, Effect, Either } from "effect"
import type { InvalidRecord, StorageError } from "../../domain/errors.js"
import { UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import type { TaskRecord } from "../../domain/Task.js"
import { headOf } from "../../domain/Task.js"
import type { ApplyStep } from "../shared.js"
import type { OpenQueue } from "./connection.js"
import { retryingOn } from "./connection.js"
import type { Remembered } from "./remembered.js"
import { rememberedRows } from "./remembered.js"
import type { Row } from "./rows.js"
import { decodeHeadRow, decodeRow, HeadColumns, NotifyChannel, noticeOf, RowColumns } from "./rows.js"
import type { PgTarget } from "./target.js"

/** The head columns, and the payload column as null: a Row whose payload is not read. */
const HeadWithoutPayload = `${HeadColumns}, NULL::text AS payload`

type Step<A, E> = (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>

/**
 * The store's `apply`, and what it remembers of each live task (which the store's reads keep
 * up to date too, so that a worker's next write starts from what it last saw).
 */
export const fencedWrites = (target: PgTarget, open: Effect.Effect<OpenQueue, StorageError>) => {
  const tasks = `${target.schema}.tasks`
  const retrying = retryingOn(target)
  const remembered = rememberedRows()

  /**
   * Write `next` over the row, fenced by `fence` (the revision the writer read, and the
   * creation time, since a collection may have removed the task and a new one of the same id
   * count its revisions from 0 again; or nothing when the writer holds the row locked), with
   * its notice in the same statement: a
   * statement is its own transaction, so the notice goes out only if the write commits. The
   * payload is not sent while the row keeps it in its column; a row written before migration 6
   * (`payloadStored` false) gets it there with this write, once.
   */
  const writeRow = (
    sql: PgClient.PgClient,
    next: TaskRecord,
    fence: Remembered | undefined,
    payloadStored: boolean
  ) =>
    Effect.map(
      sql<{ readonly revision: string }>`
        WITH written AS (
          UPDATE ${sql(tasks)}
          SET state = ${next.state}, not_before = ${next.not_before ?? null},
            record = ${JSON.stringify(headOf(next))}, pending_claim = NULL
            ${payloadStored ? sql.literal("") : sql`, payload = COALESCE(payload, ${JSON.stringify(next.payload)})`}
          WHERE queue = ${target.queue} AND task_id = ${next.task_id}
            ${fence === undefined ? sql.literal("") : sql`AND revision = ${fence.revision} AND state = ${fence.record.state} AND created_at = ${fence.record.created_at}`}
          RETURNING revision::text AS revision
        )
        SELECT revision, pg_notify(${NotifyChannel}, ${noticeOf(target, next)})::text AS notified FROM written`,
      (rows) => {
        const revision = rows[0]?.revision
        if (revision !== undefined) remembered.set(next, revision, true)
        return revision
      }
    )

  /**
   * The fallback: read, transition and write one row in one transaction that holds it. Used
   * when the one-statement write was refused, when the step writes nothing (an answer read
   * from a remembered record may be out of date), and for claims by id (SKIP LOCKED).
   *
   * `known` is the record the caller last had of the task: its payload (which never changes)
   * is used instead of reading the row's, so that a worker's fallback does not fetch a payload
   * it already holds. The row is read whole when nothing is known, or when its record no longer
   * names the known payload's hash (damage: the whole row says how).
   */
  const locked = <A, E>(taskId: TaskId, step: Step<A, E>, onBusy?: () => A, known?: TaskRecord) =>
    Effect.flatMap(open, ({ sql, secret }) =>
      retrying(
        "update",
        sql.withTransaction(
          Effect.gen(function* () {
            const lockRow = (columns: string) => sql<Row>`
              SELECT ${sql.literal(columns)} FROM ${sql(tasks)}
              WHERE queue = ${target.queue} AND task_id = ${taskId}
              FOR UPDATE ${sql.literal(onBusy === undefined ? "" : "SKIP LOCKED")}`
            /** The row's record with the payload the caller holds, or (damage) the row read whole. */
            const withKnown = (row: Row, held: TaskRecord) => {
              const head = Either.getOrUndefined(decodeHeadRow(target, row, secret))
              if (head !== undefined && head.payload_sha256 === held.payload_sha256)
                return Effect.succeed(Either.right({ ...head, payload: held.payload }))
              // Held already: read again whole, payload included, to say what is wrong.
              return Effect.map(lockRow(RowColumns), (whole) =>
                whole[0] === undefined
                  ? Either.left(new UnknownTask({ taskId }))
                  : decodeRow(target, whole[0], secret)
              )
            }
            const rows = yield* lockRow(known === undefined ? RowColumns : HeadWithoutPayload)
            const row = rows[0]
            if (row === undefined) {
              if (onBusy === undefined) return Either.left(new UnknownTask({ taskId }))
              const exists =
                yield* sql`SELECT 1 FROM ${sql(tasks)} WHERE queue = ${target.queue} AND task_id = ${taskId}`
              return exists.length > 0 ? Either.right(onBusy()) : Either.left(new UnknownTask({ taskId }))
            }
            const record: Either.Either<TaskRecord, InvalidRecord | UnknownTask> =
              known === undefined ? decodeRow(target, row, secret) : yield* withKnown(row, known)
            if (Either.isLeft(record)) return Either.left(record.left)
            remembered.set(record.right, row.revision, !row.payload_missing)
            const stepped = step(record.right, yield* Clock.currentTimeMillis)
            if (Either.isLeft(stepped)) return Either.left(stepped.left)
            const [next, answer] = stepped.right
            if (next !== undefined) yield* writeRow(sql, next, undefined, !row.payload_missing)
            return Either.right(answer)
          }).pipe(Effect.map((either): Either.Either<A, E | UnknownTask | InvalidRecord> => either))
        )
      ).pipe(
        // What was remembered inside a transaction that did not commit is not the row: forgotten,
        // or a later fenced write could pass on it over someone else's change (a cancel request).
        Effect.tapError(() => Effect.sync(() => remembered.forget(taskId))),
        Effect.flatMap((either) => either)
      )
    )

  /** The record and revision of a row, read without a lock (and remembered). */
  const readRemembered = (taskId: TaskId) =>
    Effect.flatMap(open, ({ sql, secret }) =>
      Effect.flatMap(
        retrying(
          "read",
          sql<Row>`SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
            WHERE queue = ${target.queue} AND task_id = ${taskId}`
        ),
        (rows): Effect.Effect<Remembered, UnknownTask | InvalidRecord> => {
          const row = rows[0]
          if (row === undefined) return Effect.fail(new UnknownTask({ taskId }))
          return Effect.map(decodeRow(target, row, secret), (record) => {
            remembered.set(record, row.revision, !row.payload_missing)
            return { record, revision: row.revision, payloadStored: !row.payload_missing }
          })
        }
      )
    )

  /**
   * A transition in one statement in the common case: the pure step runs on the record this
   * store last read or wrote (read now, without a lock, when it has none), and its result is
   * written fenced by that record's revision. A refused fence (a cancel request, a reaper or
   * another worker wrote meanwhile) falls back to `locked`, which runs the same step on the
   * row as it is now. Either way the step is the meaning; the fence makes sure it ran on the
   * row's current record.
   */
  const apply: ApplyStep<UnknownTask | InvalidRecord | StorageError> = <A, E>(
    taskId: TaskId,
    step: Step<A, E>,
    onBusy?: () => A
  ) =>
    onBusy !== undefined
      ? locked(taskId, step, onBusy)
      : Effect.gen(function* () {
          const { sql } = yield* open
          const known = remembered.get(taskId) ?? (yield* readRemembered(taskId))
          const stepped = step(known.record, yield* Clock.currentTimeMillis)
          if (Either.isRight(stepped)) {
            const [next, answer] = stepped.right
            if (next !== undefined) {
              // A retry after a commit whose answer was lost finds the fence moved by its own
              // write, and the fallback then answers from the row as it is (as a retried
              // transaction did before).
              const written = yield* retrying("update", writeRow(sql, next, known, known.payloadStored))
              if (written !== undefined) return answer
            }
          }
          remembered.forget(taskId)
          return yield* locked(taskId, step, undefined, known.record)
        })

  return { remembered, apply }
}
