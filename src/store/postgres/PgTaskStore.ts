/**
 * The PostgreSQL TaskStore: the same contract as the file store, for queues that many
 * clients and workers on many machines share (docs/scaling.md).
 *
 * One row per task holds the same JSON record the file store writes, and every change is
 * one transaction: `SELECT … FOR UPDATE` the row, apply the pure transition of
 * `domain/transitions.ts`, `UPDATE` it, and `pg_notify` in the same transaction, so a
 * notification goes out only for a change that committed. Claims add `SKIP LOCKED`, so
 * racing workers pass over each other's tasks rather than queue behind them.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import type { SqlError } from "@effect/sql/SqlError"
import type * as Statement from "@effect/sql/Statement"
import { Clock, Effect, Either } from "effect"
import type { InvalidRecord, StorageError } from "../../domain/errors.js"
import { UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import {
  DefaultMaxPayloadBytes,
  decodeCursor,
  encodeCursor,
  preparePayload
} from "../../domain/submission.js"
import type { InvalidRecordReport, TaskRecord, TaskSummary } from "../../domain/Task.js"
import { isoTime, isTaskState, toReceipt, toSummary, toView } from "../../domain/Task.js"
import { providerOfPayload } from "../../domain/provider.js"
import * as Transitions from "../../domain/transitions.js"
import { Host } from "../../services/Host.js"
import type { ClaimedTask, TaskStoreShape } from "../../services/TaskStore.js"
import type { ApplyStep, ClaimRoom } from "../shared.js"
import {
  claimantFor,
  claimRoomOf,
  takeRoom,
  DefaultListLimit,
  emptyStateCounts,
  listFilter,
  MaxListLimit,
  onceSuccessful,
  readiness,
  transitionOperations
} from "../shared.js"
import type { Row } from "./rows.js"
import { decodeRow, NotifyChannel, noticeOf, pendingClaimHead, rowOf, RowColumns } from "./rows.js"
import { openQueue, retryingOn, storageErrorOf } from "./connection.js"
import type { Remembered } from "./remembered.js"
import { rememberedRows } from "./remembered.js"
import { noticeHub } from "./notices.js"
import { pgWorkerRegistry } from "./workers.js"
import type { PgTarget } from "./target.js"
import { DefaultConnectTimeoutMillis, DefaultMaxConnections } from "./target.js"

export interface PgStoreSettings {
  readonly target: PgTarget
  readonly maxConnections?: number | undefined
  readonly connectTimeoutMillis?: number | undefined
  readonly maxPayloadBytes?: number | undefined
}

/** A row of the claim statement: a claimed row (all null when none was), and the waiting count. */
interface ClaimRow {
  readonly task_id: string | null
  readonly state: string | null
  readonly created_at: string | null
  readonly not_before: string | null
  readonly record: string | null
  readonly revision: string | null
  readonly pending_claim: string | null
  /** What `not_before` was before the claim, to put a damaged row back as it was. */
  readonly was_not_before: string | null
  readonly waiting: number
  readonly next_due_at: string | null
}

/** Submission order of rows (their columns are "C"-collated, as JavaScript compares). */
const bySubmission = (a: Row, b: Row): number =>
  a.created_at < b.created_at
    ? -1
    : a.created_at > b.created_at
      ? 1
      : a.task_id < b.task_id
        ? -1
        : a.task_id > b.task_id
          ? 1
          : 0

/** The claimed row, when the claim statement's row holds one. */
const claimedRow = (row: ClaimRow): Row | undefined =>
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
        revision: row.revision,
        pending_claim: row.pending_claim
      }

export const makePgTaskStore = (settings: PgStoreSettings) =>
  Effect.gen(function* () {
    const host = yield* Host
    const { target } = settings
    const maxPayloadBytes = settings.maxPayloadBytes ?? DefaultMaxPayloadBytes
    const connectTimeoutMillis = settings.connectTimeoutMillis ?? DefaultConnectTimeoutMillis
    const layerScope = yield* Effect.scope
    const tasks = `${target.schema}.tasks`

    const retrying = retryingOn(target)

    /**
     * Made by the first operation, so that a command rejecting its input connects to nothing,
     * and an MCP server starts (and reports a clear error per call) while the database is down.
     */
    const open = yield* onceSuccessful(openQueue(target, settings, host, layerScope))

    const remembered = rememberedRows()

    /**
     * Write `next` over the row, fenced by `fence` (the revision the writer read, or nothing
     * when the writer holds the row locked), with its notice in the same statement: a
     * statement is its own transaction, so the notice goes out only if the write commits.
     * The new revision, or undefined when the fence refused (someone else wrote meanwhile).
     */
    const writeRow = (sql: PgClient.PgClient, next: TaskRecord, fence: Remembered | undefined) =>
      Effect.map(
        sql<{ readonly revision: string }>`
          WITH written AS (
            UPDATE ${sql(tasks)}
            SET state = ${next.state}, not_before = ${next.not_before ?? null}, record = ${JSON.stringify(next)},
              pending_claim = NULL
            WHERE queue = ${target.queue} AND task_id = ${next.task_id}
              ${fence === undefined ? sql.literal("") : sql`AND revision = ${fence.revision} AND state = ${fence.record.state}`}
            RETURNING revision::text AS revision
          )
          SELECT revision, pg_notify(${NotifyChannel}, ${noticeOf(target, next)})::text AS notified FROM written`,
        (rows) => {
          const revision = rows[0]?.revision
          if (revision !== undefined) remembered.set(next, revision)
          return revision
        }
      )

    type Step<A, E> = (
      record: TaskRecord,
      now: number
    ) => Either.Either<readonly [TaskRecord | undefined, A], E>

    /**
     * The fallback: read, transition and write one row in one transaction that holds it. Used
     * when the one-statement write was refused, when the step writes nothing (an answer read
     * from a remembered record may be out of date), and for claims by id (SKIP LOCKED).
     */
    const locked = <A, E>(taskId: TaskId, step: Step<A, E>, onBusy?: () => A) =>
      Effect.flatMap(open, ({ sql, secret }) =>
        retrying(
          "update",
          sql.withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<Row>`
                SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
                WHERE queue = ${target.queue} AND task_id = ${taskId}
                FOR UPDATE ${sql.literal(onBusy === undefined ? "" : "SKIP LOCKED")}`
              const row = rows[0]
              if (row === undefined) {
                if (onBusy === undefined) return Either.left(new UnknownTask({ taskId }))
                const exists =
                  yield* sql`SELECT 1 FROM ${sql(tasks)} WHERE queue = ${target.queue} AND task_id = ${taskId}`
                return exists.length > 0 ? Either.right(onBusy()) : Either.left(new UnknownTask({ taskId }))
              }
              const record = decodeRow(target, row, secret)
              if (Either.isLeft(record)) return Either.left(record.left)
              remembered.set(record.right, row.revision)
              const stepped = step(record.right, yield* Clock.currentTimeMillis)
              if (Either.isLeft(stepped)) return Either.left(stepped.left)
              const [next, answer] = stepped.right
              if (next !== undefined) yield* writeRow(sql, next, undefined)
              return Either.right(answer)
            }).pipe(Effect.map((either): Either.Either<A, E | UnknownTask | InvalidRecord> => either))
          )
        ).pipe(Effect.flatMap((either) => either))
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
              remembered.set(record, row.revision)
              return { record, revision: row.revision }
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
                const written = yield* retrying("update", writeRow(sql, next, known))
                if (written !== undefined) return answer
              }
            }
            remembered.forget(taskId)
            return yield* locked(taskId, step)
          })

    const selectRows = (
      operation: string,
      query: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<Row>, SqlError>
    ) => Effect.flatMap(open, ({ sql }) => retrying(operation, query(sql)))

    /** Decode rows; the damaged ones are reported, never returned. */
    const sortRows = (rows: ReadonlyArray<Row>) =>
      Effect.map(open, ({ secret }) => {
        const records: Array<TaskRecord> = []
        const invalid: Array<InvalidRecordReport> = []
        for (const row of rows)
          Either.match(decodeRow(target, row, secret), {
            onLeft: (error) => invalid.push({ file: error.file, reason: error.reason }),
            onRight: (record) => {
              remembered.set(record, row.revision)
              records.push(record)
            }
          })
        return { records, invalid }
      })

    const live: TaskStoreShape["live"] = Effect.gen(function* () {
      const rows = yield* selectRows(
        "read the live tasks of",
        (sql) => sql<Row>`
          SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
          WHERE queue = ${target.queue} AND state IN ('queued', 'running')
          ORDER BY created_at, task_id`
      )
      const { records, invalid } = yield* sortRows(rows)
      const queued = records.filter((record) => record.state === "queued")
      return {
        queued: queued.map((record) => record.task_id),
        ...readiness(queued, yield* Clock.currentTimeMillis),
        running: records.filter((record) => record.state === "running"),
        invalid
      }
    }).pipe(Effect.withSpan("TaskStore.live"))

    /**
     * One claim round in one statement: the next ready rows, oldest first, locked and skipping
     * rows other transactions hold (one `ORDER BY … LIMIT` per provider with room left, one
     * for every other provider, each over an index that serves it, then the oldest `room.left`
     * of them), moved to running with their claim's inputs stored beside the record
     * (rows.ts, PendingClaim), each announced; and the count of tasks waiting out a backoff,
     * from the same snapshot. Always one row; `task_id` is null when nothing was claimed.
     */
    const claimRound = (
      sql: PgClient.PgClient,
      room: ClaimRoom,
      now: number,
      head: string,
      tokens: ReadonlyArray<string>,
      passed: ReadonlyArray<string>
    ) => {
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
          RETURNING t.task_id, t.state, t.created_at, t.not_before, t.record, t.revision::text AS revision,
            t.pending_claim, picked.not_before AS was_not_before
        ),
        waiting AS (
          SELECT count(*)::int AS waiting, min(not_before) AS next_due_at FROM ${sql(tasks)}
          WHERE queue = ${target.queue} AND state = 'queued' AND not_before IS NOT NULL
            AND not_before > ${nowText}
        )
        SELECT claimed.*, waiting.waiting, waiting.next_due_at,
          CASE WHEN claimed.task_id IS NULL THEN NULL ELSE pg_notify(${NotifyChannel},
            json_build_array(${target.schema}::text, ${target.queue}::text, claimed.task_id, 'running')::text
          )::text END AS notified
        FROM waiting LEFT JOIN claimed ON true`
    }

    const claimNext: TaskStoreShape["claimNext"] = Effect.fn("TaskStore.claimNext")(function* (request) {
      const { sql, secret } = yield* open
      const limit = Math.max(0, request.limit)
      // One lease token per claim, drawn before the statement (which may be run again).
      const tokens = yield* Effect.forEach(Array.from({ length: limit }), () => host.token)
      const claimant = yield* claimantFor(host, request.workerId)
      const claimed: Array<ClaimedTask> = []
      const invalid: Array<InvalidRecordReport> = []
      let room = claimRoomOf(request)
      let waiting: { readonly waiting: number; readonly next_due_at: string | null } = {
        waiting: 0,
        next_due_at: null
      }
      // Damaged rows the claim met: reported, put back as they were, and passed over by the
      // next round, which claims in their place. Each round passes over more, so it ends.
      const passed: Array<string> = []
      for (;;) {
        const now = yield* Clock.currentTimeMillis
        const head = pendingClaimHead({
          worker_id: claimant.worker_id,
          pid: claimant.pid,
          host: claimant.host,
          boot_id: claimant.boot_id,
          now,
          lease_ms: request.leaseMillis,
          ...(request.retry === undefined ? {} : { retry: request.retry })
        })
        const rows = yield* retrying(
          "claim from",
          claimRound(sql, room, now, head, tokens.slice(claimed.length), passed)
        )
        const first = rows[0]
        waiting = { waiting: first?.waiting ?? 0, next_due_at: first?.next_due_at ?? null }
        const putBack: Array<{ readonly task_id: string; readonly not_before: string | null }> = []
        // RETURNING follows no order: the batch is in submission order, ties by task id.
        const ordered = rows
          .flatMap((row) => {
            const claimedAt = claimedRow(row)
            return claimedAt === undefined ? [] : [[claimedAt, row.was_not_before] as const]
          })
          .sort(([a], [b]) => bySubmission(a, b))
        for (const [found, wasNotBefore] of ordered) {
          const record = decodeRow(target, found, secret)
          if (Either.isLeft(record) || record.right.lease === null) {
            if (Either.isLeft(record)) invalid.push({ file: record.left.file, reason: record.left.reason })
            putBack.push({ task_id: found.task_id, not_before: wasNotBefore })
            continue
          }
          remembered.set(record.right, found.revision)
          claimed.push({ record: record.right, lease: record.right.lease })
          room = takeRoom(room, providerOfPayload(record.right.payload))
        }
        if (putBack.length === 0) break
        yield* retrying(
          "claim from",
          sql`UPDATE ${sql(tasks)} SET state = 'queued', not_before = back.not_before, pending_claim = NULL
            FROM ${sql.updateValues(putBack, "back")}
            WHERE ${sql(tasks)}.queue = ${target.queue} AND ${sql(tasks)}.task_id = back.task_id`
        )
        passed.push(...putBack.map((row) => row.task_id))
        if (room.left <= 0) break
      }
      return { claimed, invalid, ...waiting }
    })

    const running: TaskStoreShape["running"] = Effect.gen(function* () {
      const rows = yield* selectRows(
        "read the running tasks of",
        (sql) => sql<Row>`
          SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
          WHERE queue = ${target.queue} AND state = 'running'
          ORDER BY created_at, task_id`
      )
      const { records, invalid } = yield* sortRows(rows)
      return { running: records, invalid }
    }).pipe(Effect.withSpan("TaskStore.running"))

    const notices = yield* noticeHub(target, connectTimeoutMillis, layerScope)

    const readRecord = (taskId: TaskId) =>
      Effect.flatMap(
        selectRows(
          "read",
          (sql) => sql<Row>`
            SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
            WHERE queue = ${target.queue} AND task_id = ${taskId}`
        ),
        (rows): Effect.Effect<TaskRecord, UnknownTask | InvalidRecord | StorageError> => {
          const row = rows[0]
          return row === undefined
            ? Effect.fail(new UnknownTask({ taskId }))
            : Effect.flatMap(open, ({ secret }) =>
                Effect.tap(decodeRow(target, row, secret), (record) => remembered.set(record, row.revision))
              )
        }
      )

    const submit: TaskStoreShape["submit"] = Effect.fn("TaskStore.submit")(function* (request) {
      const prepared = yield* preparePayload(request.payload, maxPayloadBytes)
      const { sql, secret } = yield* open
      const taskId = Transitions.taskIdFor(secret, request.clientRequestId)
      const record = Transitions.newRecord({
        taskId,
        clientRequestId: request.clientRequestId,
        payload: request.payload,
        payloadSha256: prepared.sha,
        now: yield* Clock.currentTimeMillis
      })
      // One statement, so one round trip: the insert, and its notice only when it inserted (a
      // statement is its own transaction; the notice is delivered when it commits).
      const inserted = yield* retrying(
        "submit to",
        sql<{ readonly inserted: number }>`
          WITH inserted AS (
            INSERT INTO ${sql(tasks)} ${sql.insert(rowOf(target.queue, record))}
            ON CONFLICT (queue, task_id) DO NOTHING RETURNING task_id
          ), notified AS (
            SELECT pg_notify(${NotifyChannel}, ${noticeOf(target, record)}) FROM inserted
          )
          SELECT count(*)::int AS inserted FROM notified`
      )
      if ((inserted[0]?.inserted ?? 0) > 0) return toReceipt(record)
      // The request id was taken: the same payload gets the stored receipt, another a conflict.
      // Rows are never deleted, so the row that was in the way is there to read.
      const existing = yield* readRecord(taskId).pipe(
        Effect.catchTag("UnknownTask", () =>
          Effect.fail(
            storageErrorOf(
              target,
              "submit to",
              `task ${taskId} was in the way of the insert, then could not be read`
            )
          )
        )
      )
      return yield* Transitions.resubmit(existing, prepared.sha)
    })

    const list: TaskStoreShape["list"] = Effect.fn("TaskStore.list")(function* (request) {
      const after = request.cursor === undefined ? undefined : yield* decodeCursor(request.cursor)
      const limit = Math.min(Math.max(request.limit ?? DefaultListLimit, 1), MaxListLimit)
      // Rows newest first, a batch at a time, past damaged ones (never listed). The provider and
      // search filters are applied to decoded records, as the other stores do, so that a damaged
      // row (whose text may not even parse as JSON) never breaks a listing.
      const keep = listFilter(request)
      const filtered = request.provider !== undefined || (request.search ?? "") !== ""
      const batch = filtered ? Math.max(limit + 1, MaxListLimit) : limit + 1
      const found: Array<TaskSummary> = []
      let position = after
      for (;;) {
        const from = position
        const rows = yield* selectRows(
          "list",
          (sql) => sql<Row>`
            SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
            WHERE queue = ${target.queue}
              ${request.state === undefined ? sql.literal("") : sql`AND state = ${request.state}`}
              ${from === undefined ? sql.literal("") : sql`AND (created_at, task_id) < (${from[0]}, ${from[1]})`}
            ORDER BY created_at DESC, task_id DESC
            LIMIT ${batch}`
        )
        found.push(...(yield* sortRows(rows)).records.filter(keep).map(toSummary))
        const last = rows[rows.length - 1]
        if (found.length > limit || rows.length < batch || last === undefined) break
        position = [last.created_at, last.task_id]
      }
      const page = found.slice(0, limit)
      const tail = page[page.length - 1]
      return {
        tasks: page,
        next_cursor: found.length > limit && tail ? encodeCursor(tail.created_at, tail.task_id) : null
      }
    })

    const store: TaskStoreShape = {
      ...transitionOperations(host, apply),
      submit,
      record: Effect.fn("TaskStore.record")((taskId: TaskId) => readRecord(taskId)),
      read: Effect.fn("TaskStore.read")(function* (taskId, sha) {
        return toView(yield* Transitions.checkHash(yield* readRecord(taskId), sha))
      }),
      live,
      claimNext,
      running,
      wakeups: notices.wakeups,
      claimConcurrency: settings.maxConnections ?? DefaultMaxConnections,
      changes: notices.changes,
      list,
      check: Effect.gen(function* () {
        const rows = yield* selectRows(
          "check",
          (sql) => sql<Row>`
            SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
            WHERE queue = ${target.queue}`
        )
        const { records, invalid } = yield* sortRows(rows)
        const states = emptyStateCounts()
        for (const record of records) states[record.state] += 1
        return { records: rows.length, states, invalid_records: invalid }
      }).pipe(Effect.withSpan("TaskStore.check")),
      counts: Effect.gen(function* () {
        const { sql } = yield* open
        const rows = yield* retrying(
          "count the tasks of",
          sql<{ readonly state: string; readonly n: number }>`
            SELECT state, count(*)::int AS n FROM ${sql(tasks)} WHERE queue = ${target.queue} GROUP BY state`
        )
        const states = emptyStateCounts()
        // A state column no relaykeep writes (a row edited by hand) is no state to count.
        for (const row of rows) if (isTaskState(row.state)) states[row.state] += row.n
        return states
      }).pipe(Effect.withSpan("TaskStore.counts")),
      workers: pgWorkerRegistry(target, (operation, query) =>
        Effect.flatMap(open, ({ sql }) => retrying(operation, query(sql)))
      )
    }
    return store
  })
