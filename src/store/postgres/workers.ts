/**
 * PostgreSQL's worker registry: the `workers` table, one row per running watcher of a queue,
 * upserted at each heartbeat. The row's `presence` is the same JSON the file store writes; the
 * columns beside it are copies: `expires_at` for the prune's `WHERE`, `worker_id` for people who
 * query the table.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either } from "effect"
import type { StorageError } from "../../domain/errors.js"
import { isoTime } from "../../domain/time.js"
import { decodePresence, encodePresence, presenceOrder } from "../../domain/worker.js"
import type { WorkerPresence } from "../../domain/worker.js"
import type { WorkerRegistry } from "../../services/TaskStore.js"
import type { PgTarget } from "./target.js"

type Run = <A>(
  operation: string,
  query: (sql: PgClient.PgClient) => Effect.Effect<A, SqlError>
) => Effect.Effect<A, StorageError>

export const pgWorkerRegistry = (target: PgTarget, run: Run): WorkerRegistry => {
  const workers = `${target.schema}.workers`
  return {
    announce: (presence) =>
      run(
        "announce a worker to",
        (sql) => sql`
          INSERT INTO ${sql(workers)} (queue, instance, worker_id, expires_at, presence)
          VALUES (${target.queue}, ${presence.instance}, ${presence.worker_id}, ${presence.expires_at},
            ${encodePresence(presence)})
          ON CONFLICT (queue, instance) DO UPDATE
          SET worker_id = EXCLUDED.worker_id, expires_at = EXCLUDED.expires_at, presence = EXCLUDED.presence`
      ).pipe(Effect.asVoid, Effect.withSpan("TaskStore.workers.announce")),
    retire: (instance) =>
      Effect.asVoid(
        run(
          "retire a worker from",
          (sql) => sql`DELETE FROM ${sql(workers)} WHERE queue = ${target.queue} AND instance = ${instance}`
        )
      ).pipe(Effect.withSpan("TaskStore.workers.retire")),
    list: Effect.map(
      run(
        "list the workers of",
        (sql) => sql<{ readonly instance: string; readonly presence: string }>`
          SELECT instance, presence FROM ${sql(workers)} WHERE queue = ${target.queue}`
      ),
      (rows) =>
        rows
          .flatMap((row): ReadonlyArray<WorkerPresence> => {
            const decoded = decodePresence(row.presence)
            return Either.isRight(decoded) && decoded.right.instance === row.instance ? [decoded.right] : []
          })
          .sort(presenceOrder)
    ).pipe(Effect.withSpan("TaskStore.workers.list")),
    // Expired rows go by their column, in one statement, so that a worker announcing again at
    // that moment keeps its row. Rows that do not decode were not written by a worker: each goes
    // only if it is still the text that was read.
    prune: Effect.fn("TaskStore.workers.prune")(function* (expiredBefore: number) {
      const expired = yield* run(
        "prune the workers of",
        (sql) => sql`
            DELETE FROM ${sql(workers)} WHERE queue = ${target.queue} AND expires_at < ${isoTime(expiredBefore)}
            RETURNING instance`
      )
      const rows = yield* run(
        "prune the workers of",
        (sql) => sql<{ readonly instance: string; readonly presence: string }>`
            SELECT instance, presence FROM ${sql(workers)} WHERE queue = ${target.queue}`
      )
      const damaged = rows.filter((row) => {
        const decoded = decodePresence(row.presence)
        return Either.isLeft(decoded) || decoded.right.instance !== row.instance
      })
      yield* Effect.forEach(
        damaged,
        (row) =>
          run(
            "prune the workers of",
            (sql) => sql`
                DELETE FROM ${sql(workers)}
                WHERE queue = ${target.queue} AND instance = ${row.instance} AND presence = ${row.presence}`
          ),
        { discard: true }
      )
      return expired.length + damaged.length
    })
  }
}
