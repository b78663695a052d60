/**
 * Connections to PostgreSQL: the pool, the schema brought up to date, and how an operation
 * rides out a database that goes away for a moment (a restart, a failover, a network cut).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import type { MigrationError } from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, ExecutionStrategy, Exit, Option, Schedule, Scope } from "effect"
import { StorageError } from "../../domain/errors.js"
import type { Host } from "../../services/Host.js"
import { migrate } from "./schema.js"
import type { PgTarget } from "./target.js"
import { DefaultConnectTimeoutMillis, DefaultMaxConnections } from "./target.js"

/**
 * Errors a retry can outlive: the connection broke, the server is restarting or refused a
 * connection for a moment, or a statement was cancelled. Anything else (a constraint, a
 * permission) is reported at once.
 *
 * A cancelled statement (57014) rolled back, so running it again is safe, and a fiber that is
 * alive to see the error did not ask for it: the driver cancels an interrupted query with
 * `pg_cancel_backend`, which names a connection rather than a query, so a cancel sent for a
 * query that ended just before lands on whatever the connection runs next once the pool has
 * handed it on. A worker interrupts its cancel poll and heartbeat each time an attempt ends, so
 * under load this hits the next statement on that connection, often the attempt's own outcome.
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
  "40P01", // deadlock_detected
  "57014", // query_canceled: a stray cancel (above), an operator's pg_cancel_backend, a statement_timeout
  "25006", // read_only_sql_transaction: a failover's old primary, still answering
  "EAI_AGAIN" // a name lookup that failed for a moment (a failover moving a DNS name)
])

const codeOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

export const messageOf = (cause: unknown): string | undefined =>
  cause instanceof Error && cause.message !== "" ? cause.message : undefined

export const isTransient = (error: SqlError): boolean => {
  const code = codeOf(error.cause)
  if (code !== undefined) return transientCodes.has(code) || code.startsWith("08")
  return /connection terminated|connection ended|connection timeout|timeout exceeded when trying to connect|connection timed out|not queryable/i.test(
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
const isMigrationError = (error: unknown): error is MigrationError =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "MigrationError"

export const isSqlError = (error: unknown): error is SqlError =>
  typeof error === "object" && error !== null && "_tag" in error && error._tag === "SqlError"

export const storageErrorOf = (target: PgTarget, operation: string, reason: string) =>
  new StorageError({ operation, path: `postgres ${target.display}`, reason })

/**
 * Run a statement or a transaction against `target`, again while it fails transiently (for
 * up to RetryWindow); a SqlError that remains becomes a StorageError naming the target.
 */
export const retryingOn =
  (target: PgTarget) =>
  <A, E, R>(
    operation: string,
    body: Effect.Effect<A, E | SqlError, R>
  ): Effect.Effect<A, Exclude<E, SqlError> | StorageError, R> =>
    body.pipe(
      // @effect/sql turns a ROLLBACK or COMMIT that fails (on a connection that just broke)
      // into a defect; it is the same broken connection, so it is retried like any other.
      Effect.catchSomeDefect((defect) =>
        isSqlError(defect) ? Option.some(Effect.fail(defect)) : Option.none()
      ),
      Effect.retry({ schedule: retrySchedule, while: (error) => isSqlError(error) && isTransient(error) }),
      Effect.catchIf(isSqlError, (error) =>
        Effect.fail(storageErrorOf(target, operation, messageOf(error.cause) ?? error.message))
      )
    )

export interface PoolSettings {
  readonly maxConnections?: number | undefined
  readonly connectTimeoutMillis?: number | undefined
}

/** A pool on `target`, open while the scope is, with its schema at the newest version. */
export const connectPool = (
  target: PgTarget,
  settings: PoolSettings
): Effect.Effect<PgClient.PgClient, StorageError, Scope.Scope> =>
  Effect.gen(function* () {
    const retrying = retryingOn(target)
    const sql = yield* retrying(
      "connect to",
      PgClient.make({
        url: target.url,
        maxConnections: settings.maxConnections ?? DefaultMaxConnections,
        connectTimeout: Duration.millis(settings.connectTimeoutMillis ?? DefaultConnectTimeoutMillis),
        applicationName: "relaykeep"
      }).pipe(Effect.provide(Reactivity.layer))
    )
    yield* retrying(
      "migrate",
      migrate(target.schema).pipe(
        Effect.provideService(SqlClient, sql),
        // The Migrator turns a failing migration into a defect; it is this store's failure to open.
        Effect.catchSomeDefect((defect) =>
          isMigrationError(defect) ? Option.some(Effect.fail(defect)) : Option.none()
        )
      )
    ).pipe(
      Effect.catchTag("MigrationError", (error) => {
        const cause = isSqlError(error.cause)
          ? (messageOf(error.cause.cause) ?? error.cause.message)
          : undefined
        return Effect.fail(
          storageErrorOf(
            target,
            "migrate",
            cause === undefined ? error.message : `${error.message}: ${cause}`
          )
        )
      })
    )
    return sql
  })

const SecretBytes = 32
const HexSecret = /^[0-9a-f]{64}$/

export interface OpenQueue {
  readonly sql: PgClient.PgClient
  /** The key this queue's task ids are made with. */
  readonly secret: Uint8Array
}

/**
 * The pool (in a scope of its own under `scope`, closed at once if opening fails) with the
 * schema at its newest version, and the queue's key, created by whoever comes first.
 */
export const openQueue = (
  target: PgTarget,
  settings: PoolSettings,
  host: Host["Type"],
  scope: Scope.Scope
): Effect.Effect<OpenQueue, StorageError> =>
  Effect.flatMap(Scope.fork(scope, ExecutionStrategy.sequential), (pool) =>
    Effect.onError(
      Effect.gen(function* () {
        const sql = yield* Scope.extend(connectPool(target, settings), pool)
        const queues = `${target.schema}.queues`
        const fresh = Buffer.from(yield* host.randomBytes(SecretBytes)).toString("hex")
        const rows = yield* retryingOn(target)(
          "open queue",
          Effect.zipRight(
            sql`INSERT INTO ${sql(queues)} (name, secret) VALUES (${target.queue}, ${fresh})
              ON CONFLICT (name) DO NOTHING`,
            sql<{ readonly secret: string }>`SELECT secret FROM ${sql(queues)} WHERE name = ${target.queue}`
          )
        )
        const secret = rows[0]?.secret
        if (secret === undefined || !HexSecret.test(secret))
          return yield* storageErrorOf(
            target,
            "open queue",
            "the queue's secret is missing or damaged (restore it from a backup: task ids depend on it)"
          )
        return { sql, secret: Uint8Array.from(Buffer.from(secret, "hex")) }
      }),
      (cause) => Scope.close(pool, Exit.failCause(cause))
    )
  )
