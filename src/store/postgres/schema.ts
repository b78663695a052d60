/**
 * The PostgreSQL schema, created and upgraded by versioned migrations (@effect/sql's Migrator)
 * inside one named schema, so that several installations can share a database.
 *
 * Every migration runs in one transaction under an advisory lock on the schema's name: many
 * processes starting at once against an empty database create it exactly once.
 */
import * as Migrator from "@effect/sql/Migrator"
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Option } from "effect"
import { parseJson } from "../../domain/json.js"
import { providerOfPayload } from "../../domain/provider.js"
import { isJsonObject } from "./rows.js"

/**
 * The tables, one migration per version. Each record is the same JSON document the file store
 * writes, kept as text so that it is stored exactly (jsonb would refuse a `\u0000` in a
 * payload and renumber nothing, but text is what the hash was taken over); since version 6 its
 * payload is kept in a column of its own and the record holds the rest. The columns beside them
 * are copies for indexing; the record and payload are the truth, and a row whose columns
 * disagree with its record is reported as damaged.
 */
const migrations = (schema: string) => ({
  "1_queues_and_tasks": Effect.flatMap(SqlClient, (sql) =>
    Effect.all(
      [
        sql`CREATE TABLE ${sql(`${schema}.queues`)} (
          name text COLLATE "C" PRIMARY KEY,
          secret text NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now()
        )`,
        sql`CREATE TABLE ${sql(`${schema}.tasks`)} (
          queue text COLLATE "C" NOT NULL REFERENCES ${sql(`${schema}.queues`)} (name),
          task_id text COLLATE "C" NOT NULL,
          state text COLLATE "C" NOT NULL,
          created_at text COLLATE "C" NOT NULL,
          not_before text COLLATE "C",
          record text NOT NULL,
          PRIMARY KEY (queue, task_id)
        )`,
        // The live part of a queue, oldest first: what every worker pass reads.
        sql`CREATE INDEX tasks_live ON ${sql(`${schema}.tasks`)} (queue, state, created_at, task_id)
          WHERE state IN ('queued', 'running')`,
        // Listing newest first, by state or not.
        sql`CREATE INDEX tasks_newest ON ${sql(`${schema}.tasks`)} (queue, created_at DESC, task_id DESC)`
      ],
      { discard: true }
    )
  ),
  // The watching workers' last heartbeats (domain/worker.ts), one row per running instance.
  "2_workers": Effect.flatMap(
    SqlClient,
    (sql) => sql`CREATE TABLE ${sql(`${schema}.workers`)} (
      queue text COLLATE "C" NOT NULL REFERENCES ${sql(`${schema}.queues`)} (name),
      instance text COLLATE "C" NOT NULL,
      worker_id text NOT NULL,
      expires_at text COLLATE "C" NOT NULL,
      presence text NOT NULL,
      PRIMARY KEY (queue, instance)
    )`
  ),
  "3_claims": claimsMigration(schema),
  "4_revisions": revisionsMigration(schema),
  // What a claim by `claimNext` leaves for readers to apply (rows.ts, PendingClaim).
  "5_pending_claims": Effect.flatMap(
    SqlClient,
    (sql) => sql`ALTER TABLE ${sql(`${schema}.tasks`)} ADD COLUMN pending_claim text`
  ),
  // Each task's payload as JSON text of its own, so that writes of the record, which change with
  // every heartbeat and outcome, need not carry it (rows.ts). Rows written before hold the
  // payload in their record and none here; each moves it here at its next write, and a finished
  // one keeps it where it is, readable as before. Nothing is rewritten now.
  "6_payloads": Effect.flatMap(
    SqlClient,
    (sql) => sql`ALTER TABLE ${sql(`${schema}.tasks`)} ADD COLUMN payload text`
  )
})

/** How many rows the provider backfill writes per statement. */
const BackfillBatch = 500

/**
 * What claims without reading the queue need: each task's provider as a column of its own
 * (a payload never changes, so it is written once, at insert), an index that serves the
 * ready tasks of one provider oldest first, and one over the few tasks waiting out a backoff.
 * The provider of live rows is filled in here, read by our own parser rather than by a jsonb
 * cast, which a `\u0000` in a payload or a damaged row would fail; a record that does not
 * parse gets the empty provider, so that claims meet it and report it as damaged.
 */
const claimsMigration = (schema: string) =>
  Effect.flatMap(SqlClient, (sql) =>
    Effect.gen(function* () {
      const tasks = `${schema}.tasks`
      yield* sql`ALTER TABLE ${sql(tasks)} ADD COLUMN provider text COLLATE "C"`
      const live = yield* sql<{ readonly queue: string; readonly task_id: string; readonly record: string }>`
        SELECT queue, task_id, record FROM ${sql(tasks)} WHERE state IN ('queued', 'running')`
      for (let start = 0; start < live.length; start += BackfillBatch) {
        const batch = live.slice(start, start + BackfillBatch).map((row) => ({
          queue: row.queue,
          task_id: row.task_id,
          provider: providerOfRecordText(row.record)
        }))
        yield* sql`UPDATE ${sql(tasks)} SET provider = backfill.provider
          FROM ${sql.updateValues(batch, "backfill")}
          WHERE ${sql(tasks)}.queue = backfill.queue AND ${sql(tasks)}.task_id = backfill.task_id`
      }
      yield* sql`CREATE INDEX tasks_ready ON ${sql(tasks)} (queue, provider, created_at, task_id)
        WHERE state = 'queued'`
      yield* sql`CREATE INDEX tasks_waiting ON ${sql(tasks)} (queue, not_before)
        WHERE state = 'queued' AND not_before IS NOT NULL`
    })
  )

/**
 * A revision per row, bumped by the database on every update of the row, whoever makes it: a
 * relaykeep of this version, an older one still running against the upgraded schema, or a
 * hand edit. A store that remembers a row's record and revision can then write the next
 * record in one statement fenced by `revision = remembered`, and be sure that no write it did
 * not see came in between (PgTaskStore.ts, `apply`).
 */
const revisionsMigration = (schema: string) =>
  Effect.flatMap(SqlClient, (sql) =>
    Effect.gen(function* () {
      const tasks = `${schema}.tasks`
      const bump = `${schema}.bump_revision`
      yield* sql`ALTER TABLE ${sql(tasks)} ADD COLUMN revision bigint NOT NULL DEFAULT 0`
      yield* sql`CREATE FUNCTION ${sql(bump)}() RETURNS trigger LANGUAGE plpgsql AS
        'BEGIN NEW.revision := OLD.revision + 1; RETURN NEW; END'`
      yield* sql`CREATE TRIGGER tasks_revision BEFORE UPDATE ON ${sql(tasks)}
        FOR EACH ROW EXECUTE FUNCTION ${sql(bump)}()`
    })
  )

/** The provider a stored record's payload names, or "" when the record does not parse. */
export const providerOfRecordText = (text: string): string =>
  Either.match(parseJson(text), {
    onLeft: () => "",
    onRight: (record) => {
      const payload = isJsonObject(record) ? record["payload"] : undefined
      return isJsonObject(payload) ? providerOfPayload(payload) : ""
    }
  })

/** The table where the Migrator records which versions ran. */
const MigrationsTable = "migrations"

/** The newest schema version this build knows. */
export const SchemaVersion = Object.keys(migrations("x")).length

/**
 * Create the schema and bring it to the newest version. Safe to run from many processes at
 * once: the advisory lock serialises them, and the later ones find nothing left to do. A
 * schema already at the newest version is only read, so a role with no right to create
 * anything can use a schema made for it.
 */
export const migrate = (
  schema: string
): Effect.Effect<ReadonlyArray<readonly [number, string]>, SqlError | Migrator.MigrationError, SqlClient> =>
  Effect.flatMap(SqlClient, (sql) => {
    const table = `${schema}.${MigrationsTable}`
    /** The newest version that ran, 0 for none; None when there is no migrations table yet. */
    const version = Effect.flatMap(
      sql<{ readonly found: string | null }>`SELECT to_regclass(${table})::text AS found`,
      (rows) =>
        rows[0]?.found == null
          ? Effect.succeedNone
          : Effect.map(
              sql<{ readonly newest: number | null }>`SELECT max(migration_id) AS newest FROM ${sql(table)}`,
              (newest) => Option.some(newest[0]?.newest ?? 0)
            )
    )
    const tooNew = (found: number) =>
      new Migrator.MigrationError({
        reason: "failed",
        message: `schema ${schema} is at version ${found}, newer than this relaykeep knows (${SchemaVersion}); upgrade relaykeep`
      })
    const upgrade = sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`relaykeep migrate ${schema}`}))`
        const exists = yield* sql`SELECT 1 FROM pg_namespace WHERE nspname = ${schema}`
        if (exists.length === 0) yield* sql`CREATE SCHEMA ${sql(schema)}`
        // Created here rather than by the Migrator: its own probe for the table fails the
        // statement when the table is missing, which would abort this transaction.
        const found = yield* version
        if (Option.isNone(found))
          yield* sql`CREATE TABLE ${sql(table)} (
            migration_id integer PRIMARY KEY,
            created_at timestamptz NOT NULL DEFAULT now(),
            name text NOT NULL
          )`
        const current = Option.getOrElse(found, () => 0)
        if (current > SchemaVersion) return yield* tooNew(current)
        return yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations(schema)), table })
      })
    )
    return Effect.flatMap(version, (found) =>
      Option.isSome(found) && found.value === SchemaVersion
        ? Effect.succeed([])
        : Option.isSome(found) && found.value > SchemaVersion
          ? Effect.fail(tooNew(found.value))
          : upgrade
    )
  })
