/**
 * The PostgreSQL TaskStore: the same contract as the file store, for queues that many
 * clients and workers on many machines share (docs/scaling.md).
 *
 * One row per task holds the same JSON record the file store writes, and every change applies
 * the pure transitions of `domain/transitions.ts`. In the common case each is one statement
 * with its `pg_notify` (a statement is its own transaction, so a notice goes out only for a
 * change that committed): a transition writes the record it computed from the one it last
 * read or wrote, fenced by the row's revision, and falls back to a `SELECT … FOR UPDATE`
 * transaction when someone else wrote meanwhile; `claimNext` is one statement (claim.ts)
 * whose `SKIP LOCKED` makes racing workers pass over each other's tasks.
 *
 * Its backend (load, insert-if-absent, the fenced step, claims, scans) is all it writes itself;
 * `makeTaskStore` builds the port over it, with `list` and `counts` answered in SQL.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Either, Option } from "effect"
import type { InvalidRecord, StorageError } from "../../domain/errors.js"
import { UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { DefaultMaxPayloadBytes, decodeCursor, encodeCursor } from "../../domain/submission.js"
import type { InvalidRecordReport, RecordHead, TaskRecord, TaskSummary } from "../../domain/Task.js"
import { isTaskState, toSummary } from "../../domain/Task.js"
import { providerOfPayload } from "../../domain/provider.js"
import * as Transitions from "../../domain/transitions.js"
import type { CollectedTask } from "../../domain/retention.js"
import { collectedOf, namedByGroups, stillCollectable, waitsForGroup } from "../../domain/retention.js"
import { Host } from "../../services/Host.js"
import type { ClaimedTask, TaskStoreShape } from "../../services/TaskStore.js"
import {
  claimantFor,
  claimRoomOf,
  takeRoom,
  DefaultListLimit,
  emptyStateCounts,
  listFilter,
  MaxListLimit,
  onceSuccessful,
  readiness
} from "../shared.js"
import type { TaskStoreBackend } from "../make.js"
import { makeTaskStore } from "../make.js"
import type { HeadRow, Row } from "./rows.js"
import {
  decodeHeadRow,
  decodeRow,
  HeadColumns,
  NotifyChannel,
  noticeOf,
  pendingClaimHead,
  rowOf,
  RowColumns
} from "./rows.js"
import { openQueue, retryingOn, storageErrorOf } from "./connection.js"
import { bySubmission, claimedRow, claimedWith, claimRound } from "./claim.js"
import { fencedWrites } from "./fenced.js"
import { noticeHub } from "./notices.js"
import { pgWorkerRegistry } from "./workers.js"
import type { PgTarget } from "./target.js"
import { DefaultConnectTimeoutMillis } from "./target.js"

/** How many chosen rows a collection deletes per transaction (each one a bound parameter). */
const CollectBatch = 1_000

export interface PgStoreSettings {
  readonly target: PgTarget
  readonly maxConnections?: number | undefined
  readonly connectTimeoutMillis?: number | undefined
  readonly maxPayloadBytes?: number | undefined
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

    const { remembered, apply } = fencedWrites(target, open)

    const selectRows = <R extends HeadRow = Row>(
      operation: string,
      query: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<R>, SqlError>
    ) => Effect.flatMap(open, ({ sql }) => retrying(operation, query(sql)))

    /**
     * Decode rows with `decode`, telling `remember` of each that decodes; the damaged ones are
     * reported, never returned.
     */
    const sortDecoded = <R extends HeadRow, A>(
      rows: ReadonlyArray<R>,
      decode: (row: R, secret: Uint8Array) => Either.Either<A, InvalidRecord>,
      remember: (decoded: A, row: R) => void
    ) =>
      Effect.map(open, ({ secret }) => {
        const records: Array<A> = []
        const invalid: Array<InvalidRecordReport> = []
        for (const row of rows)
          Either.match(decode(row, secret), {
            onLeft: (error) => invalid.push({ file: error.file, reason: error.reason }),
            onRight: (record) => {
              remember(record, row)
              records.push(record)
            }
          })
        return { records, invalid }
      })

    /** Decode rows, payloads included, and remember them. */
    const sortRows = (rows: ReadonlyArray<Row>) =>
      sortDecoded(
        rows,
        (row, secret) => decodeRow(target, row, secret),
        (record, row) => remembered.set(record, row.revision, !row.payload_missing)
      )

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
        const roundTokens = tokens.slice(claimed.length)
        /** The round as of now: run again after a failure, its leases start when it does. */
        const round = Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const head = pendingClaimHead({
            worker_id: claimant.worker_id,
            pid: claimant.pid,
            host: claimant.host,
            boot_id: claimant.boot_id,
            now,
            lease_ms: request.leaseMillis,
            ...(request.retry === undefined ? {} : { retry: request.retry })
          })
          return claimRound(sql, target, { room, now, head, tokens: roundTokens, passed })
        })
        // Run again after a failure, the round first looks for what it may have claimed already: a
        // commit whose reply was lost leaves its rows running under these tokens, and claiming
        // others instead would strand them until their leases expire.
        let sent = false
        const rows = yield* retrying(
          "claim from",
          Effect.suspend(() => {
            if (!sent || roundTokens.length === 0) {
              sent = true
              return round
            }
            return Effect.flatMap(claimedWith(sql, target, roundTokens), (found) =>
              found.length > 0 ? Effect.succeed(found) : round
            )
          })
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
          remembered.set(record.right, found.revision, !found.payload_missing)
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

    /**
     * A record read without its payload is remembered when the payload is known already (it
     * never changes): so that a cancel request the poll found does not send the next write of
     * the attempt down the locked fallback.
     */
    const rememberHead = (head: RecordHead, row: HeadRow) => {
      const known = remembered.get(head.task_id)
      if (known !== undefined && known.record.payload_sha256 === head.payload_sha256)
        remembered.set({ ...head, payload: known.record.payload }, row.revision, !row.payload_missing)
    }

    /** Rows read without their payloads, decoded, and remembered where the payload is known. */
    const sortHeads = (rows: ReadonlyArray<HeadRow>) =>
      sortDecoded(rows, (row, secret) => decodeHeadRow(target, row, secret), rememberHead)

    // Reaping reads the leases, never the payloads.
    const running: TaskStoreShape["running"] = Effect.gen(function* () {
      const rows = yield* selectRows(
        "read the running tasks of",
        (sql) => sql<HeadRow>`
          SELECT ${sql.literal(HeadColumns)} FROM ${sql(tasks)}
          WHERE queue = ${target.queue} AND state = 'running'
          ORDER BY created_at, task_id`
      )
      const { records, invalid } = yield* sortHeads(rows)
      return { running: records, invalid }
    }).pipe(Effect.withSpan("TaskStore.running"))

    /** A task's record without its payload: a running attempt's cancel poll. */
    const loadHead = (taskId: TaskId) =>
      Effect.gen(function* () {
        const { secret } = yield* open
        const rows = yield* selectRows(
          "read",
          (sql) => sql<HeadRow>`
            SELECT ${sql.literal(HeadColumns)} FROM ${sql(tasks)}
            WHERE queue = ${target.queue} AND task_id = ${taskId}`
        )
        const row = rows[0]
        if (row === undefined) return Option.none<RecordHead>()
        const head = yield* decodeHeadRow(target, row, secret)
        rememberHead(head, row)
        return Option.some(head)
      })

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
                Effect.tap(decodeRow(target, row, secret), (record) =>
                  remembered.set(record, row.revision, !row.payload_missing)
                )
              )
        }
      )

    /**
     * Insert `record` unless its task exists: None once inserted, else the row that was there.
     * A row in the way that is gone when read was removed by a collection meanwhile (a finished
     * task's): the id is free again, and the insert is tried again.
     */
    const insertIfAbsent = (record: TaskRecord) =>
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 3; attempt++) {
          const answer = yield* insertOnce(record)
          if (answer !== "vanished") return answer
        }
        return yield* storageErrorOf(
          target,
          "submit to",
          `task ${record.task_id} was in the way of the insert, then could not be read`
        )
      })

    const insertOnce = (record: TaskRecord) =>
      Effect.gen(function* () {
        const { sql } = yield* open
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
        if ((inserted[0]?.inserted ?? 0) > 0) return Option.none<TaskRecord>()
        // The request id was taken: the row in the way is read, unless a collection removed it.
        return yield* readRecord(record.task_id).pipe(
          Effect.map(Option.some),
          Effect.catchTag("UnknownTask", () => Effect.succeed("vanished" as const))
        )
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

    /**
     * A collection: the finished rows are read without their payloads and `choose` picks; then,
     * a batch at a time, one transaction locks the chosen rows, reads them whole and deletes
     * those that still hold the record chosen at the revision read. A row that no longer
     * decodes (payload included) is damaged: reported, never deleted. A dry run reads the same
     * rows without locking them, and deletes nothing.
     */
    const collect: TaskStoreBackend["collect"] = Effect.fn("TaskStore.collect")(function* (choose, dryRun) {
      const { sql, secret } = yield* open
      const rows = yield* retrying(
        "collect from",
        sql<HeadRow>`
            SELECT ${sql.literal(HeadColumns)} FROM ${sql(tasks)}
            WHERE queue = ${target.queue} AND state IN ('complete', 'failed', 'cancelled')`
      )
      const read = yield* sortDecoded(
        rows,
        (row, key) => decodeHeadRow(target, row, key),
        () => undefined
      )
      // The live part of a broadcast keeps the rest of it: the groups and members the finished
      // rows name are read too, whatever their state (retention.ts, chooseCollectable).
      const named = namedByGroups(read.records)
      const others =
        named.length === 0
          ? { records: [], invalid: [] }
          : yield* sortDecoded(
              yield* retrying(
                "collect from",
                sql<HeadRow>`
                  SELECT ${sql.literal(HeadColumns)} FROM ${sql(tasks)}
                  WHERE queue = ${target.queue} AND task_id IN ${sql.in(named)}`
              ),
              (row, key) => decodeHeadRow(target, row, key),
              () => undefined
            )
      const invalid = [...read.invalid, ...others.invalid]
      const revisions = new Map(rows.map((row) => [row.task_id, row.revision]))
      const chosen = choose([...read.records, ...others.records])
      const chosenIds = new Set<string>(chosen.map((head) => head.task_id))
      const goneIds = new Set<string>()
      const removed: Array<CollectedTask> = []
      for (let start = 0; start < chosen.length; start += CollectBatch) {
        const batch = new Map<string, (typeof chosen)[number]>(
          chosen.slice(start, start + CollectBatch).map((head) => [head.task_id, head])
        )
        const ids = [...batch.keys()]
        const outcome = yield* retrying(
          "collect from",
          sql.withTransaction(
            Effect.gen(function* () {
              const whole = yield* sql<Row>`
                  SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
                  WHERE queue = ${target.queue} AND task_id IN ${sql.in(ids)}
                  ${sql.literal(dryRun ? "" : "FOR UPDATE")}`
              const going: Array<CollectedTask> = []
              const damaged: Array<InvalidRecordReport> = []
              const rowsById = new Map(whole.map((row) => [row.task_id, row]))
              const goingIds = new Set<string>(goneIds)
              // In the chosen order, each group record before its members.
              for (const [taskId, head] of batch) {
                const row = rowsById.get(taskId)
                if (row === undefined || waitsForGroup(head, chosenIds, goingIds)) continue
                const record = decodeRow(target, row, secret)
                if (Either.isLeft(record)) {
                  damaged.push({ file: record.left.file, reason: record.left.reason })
                  continue
                }
                if (row.revision !== revisions.get(row.task_id)) continue
                if (!stillCollectable(head, record.right)) continue
                going.push(collectedOf(head))
                goingIds.add(taskId)
              }
              if (!dryRun && going.length > 0)
                yield* sql`DELETE FROM ${sql(tasks)}
                    WHERE queue = ${target.queue} AND task_id IN ${sql.in(going.map((task) => task.task_id))}`
              return { going, damaged }
            })
          )
        )
        removed.push(...outcome.going)
        for (const task of outcome.going) goneIds.add(task.task_id)
        invalid.push(...outcome.damaged)
      }
      return { removed, invalid }
    })

    const backend: TaskStoreBackend = {
      taskIdFor: (clientRequestId) =>
        Effect.map(open, ({ secret }) => Transitions.taskIdFor(secret, clientRequestId)),
      load: (taskId) =>
        readRecord(taskId).pipe(
          Effect.map(Option.some),
          Effect.catchTag("UnknownTask", () => Effect.succeedNone)
        ),
      loadHead,
      insertIfAbsent,
      apply,
      live,
      claimNext,
      running,
      scan: Effect.flatMap(
        selectRows(
          "check",
          (sql) => sql<Row>`
            SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
            WHERE queue = ${target.queue}`
        ),
        sortRows
      ),
      wakeups: notices.wakeups,
      changes: notices.changes,
      list,
      // One grouped query of the state column, where a damaged row counts under the state its
      // column names: the dashboard's health reads this, and it never reads a record.
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
      collect,
      workers: pgWorkerRegistry(target, (operation, query) =>
        Effect.flatMap(open, ({ sql }) => retrying(operation, query(sql)))
      )
    }
    return makeTaskStore(host, backend, { maxPayloadBytes })
  })
