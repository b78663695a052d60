/**
 * Copying tasks into a PostgreSQL queue (`relaykeep migrate`): every record with its state,
 * attempts and receipts, under the same task ids, in one transaction; then read back and
 * checked, record by record, against what was copied.
 *
 * Task ids are keyed hashes of the client's request ids, so the queue takes over the key of
 * the store the tasks come from: a client that resubmits a request after the move gets its
 * old receipt back, never a second task.
 */
import type { Scope } from "effect"
import { Effect, Either } from "effect"
import { canonicalJson, sha256Hex } from "../../domain/canonical.js"
import { InvalidInput } from "../../domain/errors.js"
import type { StorageError } from "../../domain/errors.js"
import type { TaskRecord, TaskState } from "../../domain/Task.js"
import { emptyStateCounts } from "../shared.js"
import type { PoolSettings } from "./connection.js"
import { connectPool, retryingOn } from "./connection.js"
import type { Row } from "./rows.js"
import { decodeRow, RowColumns, lookAgainNotice, NotifyChannel, rowOf } from "./rows.js"
import type { PgTarget } from "./target.js"

export interface ImportReport {
  /** Records written by this run. */
  readonly copied: number
  /** Records the queue already held, identical (a migration run again). */
  readonly already_present: number
  /** Records read back from the queue and found identical to their source. */
  readonly verified: number
  /** Tasks in the queue after the copy: at least `verified`, more if it held others. */
  readonly queue_total: number
  readonly states: Readonly<Record<TaskState, number>>
  /** Whether the queue took over the source's key now, or already had it. */
  readonly key: "adopted" | "same"
}

const BatchSize = 500

/** The fingerprint the check compares: the SHA-256 of a record's canonical JSON. */
const fingerprint = (record: TaskRecord): string => sha256Hex(canonicalJson(record))

const batches = <A>(items: ReadonlyArray<A>): ReadonlyArray<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += BatchSize) out.push(items.slice(i, i + BatchSize))
  return out
}

export const importRecords = (
  target: PgTarget,
  secret: Uint8Array,
  records: ReadonlyArray<TaskRecord>,
  settings: PoolSettings = {}
): Effect.Effect<ImportReport, InvalidInput | StorageError, Scope.Scope> =>
  Effect.gen(function* () {
    const sql = yield* connectPool(target, settings)
    const retrying = retryingOn(target)
    const tasks = `${target.schema}.tasks`
    const queues = `${target.schema}.queues`
    const key = Buffer.from(secret).toString("hex")
    // A refusal fails the transaction, so that it rolls back: nothing of the run is kept.
    const refused = (reason: string) => new InvalidInput({ field: "--to", reason })

    const readBack = (ids: ReadonlyArray<string>) =>
      sql<Row>`SELECT ${sql.literal(RowColumns)} FROM ${sql(tasks)}
        WHERE queue = ${target.queue} AND task_id IN ${sql.in(ids)}`

    const written = yield* retrying(
      "migrate into",
      sql.withTransaction(
        Effect.gen(function* () {
          // The queue's row, held until commit: no other migration interleaves with this one.
          const created =
            yield* sql`INSERT INTO ${sql(queues)} (name, secret) VALUES (${target.queue}, ${key})
            ON CONFLICT (name) DO NOTHING RETURNING name`
          const held = yield* sql<{ readonly secret: string }>`
            SELECT secret FROM ${sql(queues)} WHERE name = ${target.queue} FOR UPDATE`
          // A queue that existed already made its key when something first opened it, and
          // whatever opened it may still hold that key: only a queue made now takes the source's.
          if (created.length === 0 && held[0]?.secret !== key)
            return yield* refused(
              `queue ${target.queue} already exists with a key of its own (something opened it before); migrate into a new --queue`
            )
          const adopted: ImportReport["key"] = created.length > 0 ? "adopted" : "same"
          let copied = 0
          let present = 0
          for (const batch of batches(records)) {
            const inserted = yield* sql<{ readonly task_id: string }>`
              INSERT INTO ${sql(tasks)} ${sql.insert(batch.map((record) => rowOf(target.queue, record)))}
              ON CONFLICT (queue, task_id) DO NOTHING RETURNING task_id`
            copied += inserted.length
            const fresh = new Set(inserted.map((row) => row.task_id))
            const others = batch.filter((record) => !fresh.has(record.task_id))
            if (others.length === 0) continue
            // Already there: fine if identical (a second run), a refusal if not.
            const existing = new Map(
              (yield* readBack(others.map((r) => r.task_id))).map((row) => [row.task_id, row])
            )
            for (const record of others) {
              const row = existing.get(record.task_id)
              const stored =
                row === undefined ? undefined : Either.getOrUndefined(decodeRow(target, row, secret))
              if (stored === undefined || fingerprint(stored) !== fingerprint(record))
                return yield* refused(
                  `task ${record.task_id} is already in queue ${target.queue} with other contents; nothing was copied`
                )
              present += 1
            }
          }
          // Workers waiting on this queue look at it now.
          yield* sql`SELECT pg_notify(${NotifyChannel}, ${lookAgainNotice(target)})`
          return { copied, present, adopted }
        })
      )
    )

    // The check: read every record back and compare it with its source.
    let verified = 0
    const states = emptyStateCounts()
    for (const batch of batches(records)) {
      const rows = new Map(
        (yield* retrying("verify", readBack(batch.map((r) => r.task_id)))).map((row) => [row.task_id, row])
      )
      for (const record of batch) {
        const row = rows.get(record.task_id)
        const stored = row === undefined ? undefined : Either.getOrUndefined(decodeRow(target, row, secret))
        if (stored === undefined || fingerprint(stored) !== fingerprint(record))
          return yield* new InvalidInput({
            field: "--to",
            reason: `task ${record.task_id} did not read back as it was copied`
          })
        verified += 1
        states[stored.state] += 1
      }
    }
    const total = yield* retrying(
      "verify",
      sql<{ readonly n: string }>`SELECT count(*) AS n FROM ${sql(tasks)} WHERE queue = ${target.queue}`
    )
    const queueTotal = Number(total[0]?.n ?? 0)
    if (queueTotal < verified)
      return yield* new InvalidInput({
        field: "--to",
        reason: `queue ${target.queue} counts ${queueTotal} tasks, fewer than the ${verified} copied`
      })
    return {
      copied: written.copied,
      already_present: written.present,
      verified,
      queue_total: queueTotal,
      states,
      key: written.adopted
    }
  })
