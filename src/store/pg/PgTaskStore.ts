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
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Duration, Effect, Either, Option, PubSub, Schedule, Schema, Scope, Stream } from "effect"
import { InvalidRecord, StorageError, UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { isTaskId } from "../../domain/ids.js"
import {
  DefaultMaxPayloadBytes,
  decodeCursor,
  encodeCursor,
  preparePayload
} from "../../domain/submission.js"
import type { InvalidRecordReport, TaskRecord, TaskSummary } from "../../domain/Task.js"
import { toReceipt, toSummary, toView } from "../../domain/Task.js"
import * as Transitions from "../../domain/transitions.js"
import { Host } from "../../services/Host.js"
import type { TaskStoreShape } from "../../services/TaskStore.js"
import { decodeRecordText } from "../records.js"
import type { ApplyStep } from "../shared.js"
import {
  DefaultListLimit,
  emptyStateCounts,
  MaxListLimit,
  onceSuccessful,
  readiness,
  transitionOperations
} from "../shared.js"
import { listen } from "./listen.js"
import { migrate } from "./schema.js"
import type { PgTarget } from "./target.js"
import { DefaultConnectTimeoutMillis, DefaultMaxConnections } from "./target.js"

/** One channel for every RelayKeep schema and queue; the payload says which. */
export const NotifyChannel = "relaykeep"

/** A NOTIFY payload: [schema, queue, task id, the state the write left the task in]. */
const Notice = Schema.parseJson(Schema.Tuple(Schema.String, Schema.String, Schema.String, Schema.String))
const encodeNotice = Schema.encodeSync(Notice)
const decodeNotice = Schema.decodeUnknownOption(Notice)

interface Row {
  readonly task_id: string
  readonly state: string
  readonly created_at: string
  readonly not_before: string | null
  readonly record: string
}

export interface PgStoreSettings {
  readonly target: PgTarget
  readonly maxConnections?: number | undefined
  readonly connectTimeoutMillis?: number | undefined
  readonly maxPayloadBytes?: number | undefined
}

const SecretBytes = 32
const HexSecret = /^[0-9a-f]{64}$/

/**
 * Errors a retry can outlive: the connection broke, the server is restarting or refused a
 * connection for a moment. Anything else (a constraint, a permission) is reported at once.
 */
const transientCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  "53300", // too_many_connections
  "40001", // serialization_failure
  "40P01" // deadlock_detected
])

const codeOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

const messageOf = (cause: unknown): string | undefined =>
  cause instanceof Error && cause.message !== "" ? cause.message : undefined

export const isTransient = (error: SqlError): boolean => {
  const code = codeOf(error.cause)
  if (code !== undefined) return transientCodes.has(code) || code.startsWith("08")
  return /connection terminated|connection ended|connection timeout|timeout exceeded when trying to connect|connection timed out/i.test(
    messageOf(error.cause) ?? error.message
  )
}

/**
 * How long one operation rides out a database that went away (a restart, a failover) before
 * it fails with StorageError. A failed transaction rolled back, so running it again is safe;
 * one whose commit was cut off is found already done by its own fence.
 */
export const RetryWindow = Duration.seconds(20)
const retrySchedule = Schedule.exponential(Duration.millis(100)).pipe(
  Schedule.union(Schedule.spaced(Duration.seconds(2))),
  Schedule.upTo(RetryWindow)
)
/** A broken LISTEN connection is opened again, with backoff, for as long as the store lives. */
const relistenSchedule = Schedule.exponential(Duration.millis(200)).pipe(
  Schedule.union(Schedule.spaced(Duration.seconds(10)))
)

const isSqlError = (error: unknown): error is SqlError =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "SqlError"

export const makePgTaskStore = (settings: PgStoreSettings) =>
  Effect.gen(function* () {
    const host = yield* Host
    const { target } = settings
    const maxPayloadBytes = settings.maxPayloadBytes ?? DefaultMaxPayloadBytes
    const connectTimeoutMillis = settings.connectTimeoutMillis ?? DefaultConnectTimeoutMillis
    const layerScope = yield* Effect.scope
    const tasks = `${target.schema}.tasks`
    const queues = `${target.schema}.queues`
    const rowName = (taskId: string) => `postgres ${target.display} task ${taskId}`

    const storageError = (operation: string) => (error: SqlError) =>
      new StorageError({
        operation,
        path: `postgres ${target.display}`,
        reason: messageOf(error.cause) ?? error.message
      })

    /** Run a statement (or a transaction), riding out transient failures. */
    const retrying = <A, E>(operation: string, body: Effect.Effect<A, E | SqlError>) =>
      body.pipe(
        Effect.retry({ schedule: retrySchedule, while: (error) => isSqlError(error) && isTransient(error) }),
        Effect.catchIf(isSqlError, (error) => Effect.fail(storageError(operation)(error)))
      )

    /**
     * The pool, made by the first operation: a command that rejects its input connects to
     * nothing, and an MCP server starts (and reports a clear error per call) while the
     * database is down. It lives as long as the layer.
     */
    const connect: Effect.Effect<PgClient.PgClient, StorageError> = yield* onceSuccessful(
      retrying(
        "connect to",
        PgClient.make({
          url: target.url,
          maxConnections: settings.maxConnections ?? DefaultMaxConnections,
          connectTimeout: Duration.millis(connectTimeoutMillis),
          applicationName: "relaykeep"
        }).pipe(Effect.provide(Reactivity.layer), Scope.extend(layerScope))
      )
    )

    /** The schema at its newest version, and this queue's secret (created by whoever comes first). */
    const open: Effect.Effect<
      { readonly sql: PgClient.PgClient; readonly secret: Uint8Array },
      StorageError
    > = yield* onceSuccessful(
      Effect.gen(function* () {
        const sql = yield* connect
        yield* retrying("migrate", migrate(target.schema).pipe(Effect.provideService(SqlClient, sql))).pipe(
          Effect.catchTag("MigrationError", (error) =>
            Effect.fail(
              new StorageError({
                operation: "migrate",
                path: `postgres ${target.display}`,
                reason: error.message
              })
            )
          )
        )
        const fresh = Buffer.from(yield* host.randomBytes(SecretBytes)).toString("hex")
        const rows = yield* retrying(
          "open queue",
          Effect.zipRight(
            sql`INSERT INTO ${sql(queues)} (name, secret) VALUES (${target.queue}, ${fresh})
                ON CONFLICT (name) DO NOTHING`,
            sql<{ readonly secret: string }>`SELECT secret FROM ${sql(queues)} WHERE name = ${target.queue}`
          )
        )
        const secret = rows[0]?.secret
        if (secret === undefined || !HexSecret.test(secret))
          return yield* new StorageError({
            operation: "open queue",
            path: `postgres ${target.display}`,
            reason:
              "the queue's secret is missing or damaged (restore it from a backup: task ids depend on it)"
          })
        return { sql, secret: Uint8Array.from(Buffer.from(secret, "hex")) }
      })
    )

    /** A row's record, or why it cannot be trusted: the record must also agree with its own columns. */
    const decodeRow = (row: Row): Either.Either<TaskRecord, InvalidRecord> => {
      if (!isTaskId(row.task_id))
        return Either.left(
          new InvalidRecord({ file: rowName(row.task_id), reason: "task_id is not a task id" })
        )
      return Either.flatMap(decodeRecordText(rowName(row.task_id), row.record, row.task_id), (record) =>
        record.state !== row.state ||
        record.created_at !== row.created_at ||
        (record.not_before ?? null) !== row.not_before
          ? Either.left(
              new InvalidRecord({
                file: rowName(row.task_id),
                reason: `the row's columns (state ${row.state}) disagree with its record (state ${record.state})`
              })
            )
          : Either.right(record)
      )
    }

    const notify = (sql: PgClient.PgClient, record: TaskRecord) =>
      sql`SELECT pg_notify(${NotifyChannel}, ${encodeNotice([target.schema, target.queue, record.task_id, record.state])})`

    /** Read, transition and write one row in one transaction that holds it. */
    const apply: ApplyStep<UnknownTask | InvalidRecord | StorageError> = <A, E>(
      taskId: TaskId,
      step: (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>,
      onBusy?: () => A
    ) =>
      Effect.flatMap(open, ({ sql }) =>
        retrying(
          "update",
          sql.withTransaction(
            Effect.gen(function* () {
              const rows = yield* sql<Row>`
                SELECT task_id, state, created_at, not_before, record FROM ${sql(tasks)}
                WHERE queue = ${target.queue} AND task_id = ${taskId}
                FOR UPDATE ${sql.literal(onBusy === undefined ? "" : "SKIP LOCKED")}`
              const row = rows[0]
              if (row === undefined) {
                if (onBusy === undefined) return Either.left(new UnknownTask({ taskId }))
                const exists =
                  yield* sql`SELECT 1 FROM ${sql(tasks)} WHERE queue = ${target.queue} AND task_id = ${taskId}`
                return exists.length > 0 ? Either.right(onBusy()) : Either.left(new UnknownTask({ taskId }))
              }
              const record = decodeRow(row)
              if (Either.isLeft(record)) return Either.left(record.left)
              const stepped = step(record.right, yield* Clock.currentTimeMillis)
              if (Either.isLeft(stepped)) return Either.left(stepped.left)
              const [next, answer] = stepped.right
              if (next !== undefined) {
                yield* sql`UPDATE ${sql(tasks)}
                  SET state = ${next.state}, not_before = ${next.not_before ?? null}, record = ${JSON.stringify(next)}
                  WHERE queue = ${target.queue} AND task_id = ${taskId}`
                yield* notify(sql, next)
              }
              return Either.right(answer)
            }).pipe(Effect.map((either): Either.Either<A, E | UnknownTask | InvalidRecord> => either))
          )
        ).pipe(Effect.flatMap((either) => either))
      )

    const selectRows = (
      operation: string,
      query: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<Row>, SqlError>
    ) => Effect.flatMap(open, ({ sql }) => retrying(operation, query(sql)))

    /** Decode rows; the damaged ones are reported, never returned. */
    const sortRows = (rows: ReadonlyArray<Row>) => {
      const records: Array<TaskRecord> = []
      const invalid: Array<InvalidRecordReport> = []
      for (const row of rows)
        Either.match(decodeRow(row), {
          onLeft: (error) => invalid.push({ file: error.file, reason: error.reason }),
          onRight: (record) => records.push(record)
        })
      return { records, invalid }
    }

    const live: TaskStoreShape["live"] = Effect.gen(function* () {
      const rows = yield* selectRows(
        "read the live tasks of",
        (sql) => sql<Row>`
          SELECT task_id, state, created_at, not_before, record FROM ${sql(tasks)}
          WHERE queue = ${target.queue} AND state IN ('queued', 'running')
          ORDER BY created_at, task_id`
      )
      const { records, invalid } = sortRows(rows)
      const queued = records.filter((record) => record.state === "queued")
      return {
        queued: queued.map((record) => record.task_id),
        ...readiness(queued, yield* Clock.currentTimeMillis),
        running: records.filter((record) => record.state === "running"),
        invalid
      }
    }).pipe(Effect.withSpan("TaskStore.live"))

    /**
     * The notifications of this queue, from one LISTEN connection opened by the first
     * subscriber and kept for the life of the layer. None is the connection (re)opening:
     * anything sent while it was down was lost, so every waiter should look again.
     */
    const notices = yield* PubSub.sliding<Option.Option<readonly [TaskId, string]>>(1024)
    const startListening = yield* Effect.once(
      listen(target, NotifyChannel, connectTimeoutMillis).pipe(
        Stream.runForEach((heard) => {
          if (heard._tag === "listening") return PubSub.publish(notices, Option.none())
          const notice = decodeNotice(heard.payload)
          if (Option.isNone(notice)) return Effect.void
          const [schema, queue, taskId, state] = notice.value
          return schema === target.schema && queue === target.queue && isTaskId(taskId)
            ? PubSub.publish(notices, Option.some([taskId, state] as const))
            : Effect.void
        }),
        Effect.zipRight(Effect.fail("the listening connection ended")),
        Effect.tapError((error) =>
          Effect.logDebug(`LISTEN ${target.display}: ${typeof error === "string" ? error : error.message}`)
        ),
        Effect.retry(relistenSchedule),
        Effect.forkIn(layerScope)
      )
    )
    const heard = Stream.unwrapScoped(
      Effect.zipRight(startListening, Effect.map(PubSub.subscribe(notices), Stream.fromQueue))
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
      const existing = yield* retrying(
        "submit to",
        sql.withTransaction(
          Effect.gen(function* () {
            const inserted = yield* sql`
              INSERT INTO ${sql(tasks)} (queue, task_id, state, created_at, not_before, record)
              VALUES (${target.queue}, ${taskId}, ${record.state}, ${record.created_at}, NULL, ${JSON.stringify(record)})
              ON CONFLICT (queue, task_id) DO NOTHING RETURNING task_id`
            if (inserted.length > 0) {
              yield* notify(sql, record)
              return Option.none<Row>()
            }
            const rows = yield* sql<Row>`
              SELECT task_id, state, created_at, not_before, record FROM ${sql(tasks)}
              WHERE queue = ${target.queue} AND task_id = ${taskId}`
            return Option.fromNullable(rows[0])
          })
        )
      )
      if (Option.isNone(existing)) return toReceipt(record)
      return yield* Transitions.resubmit(yield* decodeRow(existing.value), prepared.sha)
    })

    const readRecord = (taskId: TaskId) =>
      Effect.flatMap(
        selectRows(
          "read",
          (sql) => sql<Row>`
            SELECT task_id, state, created_at, not_before, record FROM ${sql(tasks)}
            WHERE queue = ${target.queue} AND task_id = ${taskId}`
        ),
        (rows): Effect.Effect<TaskRecord, UnknownTask | InvalidRecord> => {
          const row = rows[0]
          return row === undefined ? Effect.fail(new UnknownTask({ taskId })) : decodeRow(row)
        }
      )

    const list: TaskStoreShape["list"] = Effect.fn("TaskStore.list")(function* (request) {
      const after = request.cursor === undefined ? undefined : yield* decodeCursor(request.cursor)
      const limit = Math.min(Math.max(request.limit ?? DefaultListLimit, 1), MaxListLimit)
      // Rows newest first, a page and one more at a time, past damaged ones (never listed).
      const found: Array<TaskSummary> = []
      let position = after
      for (;;) {
        const from = position
        const rows = yield* selectRows(
          "list",
          (sql) => sql<Row>`
            SELECT task_id, state, created_at, not_before, record FROM ${sql(tasks)}
            WHERE queue = ${target.queue}
              ${request.state === undefined ? sql.literal("") : sql`AND state = ${request.state}`}
              ${from === undefined ? sql.literal("") : sql`AND (created_at, task_id) < (${from[0]}, ${from[1]})`}
            ORDER BY created_at DESC, task_id DESC
            LIMIT ${limit + 1}`
        )
        found.push(...sortRows(rows).records.map(toSummary))
        const last = rows[rows.length - 1]
        if (found.length > limit || rows.length <= limit || last === undefined) break
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
      read: Effect.fn("TaskStore.read")(function* (taskId, sha) {
        return toView(yield* Transitions.checkHash(yield* readRecord(taskId), sha))
      }),
      live,
      wakeups: heard.pipe(
        Stream.filter((notice) => Option.isNone(notice) || notice.value[1] === "queued"),
        Stream.map(() => undefined)
      ),
      changes: Stream.filterMap(
        heard,
        Option.map(([taskId]) => taskId)
      ),
      list,
      check: Effect.gen(function* () {
        const rows = yield* selectRows(
          "check",
          (sql) => sql<Row>`
            SELECT task_id, state, created_at, not_before, record FROM ${sql(tasks)}
            WHERE queue = ${target.queue}`
        )
        const { records, invalid } = sortRows(rows)
        const states = emptyStateCounts()
        for (const record of records) states[record.state] += 1
        return { records: rows.length, states, invalid_records: invalid }
      }).pipe(Effect.withSpan("TaskStore.check"))
    }
    return store
  })
