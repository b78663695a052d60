/**
 * The PostgreSQL store's schema and queues: created once by many processes starting at once,
 * refused when newer than this build, shared by several queues that never see each other's
 * tasks, and keyed by a secret that outlives every store instance.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import { pgAvailable, pgQuery, pgStoreAt, scopedSchema } from "../support/pg.js"

const id = (text: string) => ClientRequestId.make(text)
const worker = { workerId: "w1", leaseMillis: 60_000 }
const Opening = 6

/** The record and payload columns of a task's row, as the table holds them. */
const storedRow = (schema: string, taskId: string) =>
  Effect.map(
    Effect.promise(() =>
      pgQuery<{ readonly record: string; readonly payload: string | null }>(
        `SELECT record, payload FROM "${schema}".tasks WHERE task_id = $1`,
        [taskId]
      )
    ),
    (rows) => rows[0]
  )

describe.skipIf(!pgAvailable)("PostgreSQL store: schema and queues", () => {
  it.scopedLive(
    `${Opening} stores opening a fresh schema at once all succeed, migrate it once and share one key`,
    () =>
      Effect.gen(function* () {
        // Several rounds, each on an empty schema: the race is in the first moments only.
        for (let round = 0; round < 3; round++) {
          const schema = yield* scopedSchema
          // Separate layers: each store has a pool of its own, as separate processes would.
          const stores = yield* Effect.all(
            Array.from({ length: Opening }, (_, i) =>
              pgStoreAt(schema, { hostname: `machine-${i}`, pid: 100 + i })
            ),
            { concurrency: "unbounded" }
          )
          const migrations = yield* Effect.promise(() =>
            pgQuery<{ readonly migration_id: number }>(`SELECT migration_id FROM "${schema}".migrations`)
          )
          assert.deepStrictEqual(
            migrations.map((row) => row.migration_id),
            [1, 2, 3, 4, 5, 6],
            "each version recorded exactly once"
          )
          const queues = yield* Effect.promise(() => pgQuery(`SELECT name FROM "${schema}".queues`))
          assert.lengthOf(queues, 1, "one queue, one secret")
          const receipts = yield* Effect.all(
            stores.map((store) => store.submit({ clientRequestId: id("same"), payload: { n: 1 } })),
            { concurrency: "unbounded" }
          )
          for (const receipt of receipts)
            assert.deepStrictEqual(receipt, receipts[0], "one task for one request id")
          const check = yield* Effect.promise(() => pgQuery(`SELECT task_id FROM "${schema}".tasks`))
          assert.lengthOf(check, 1)
        }
      })
  )

  it.scopedLive(
    "a schema of version 1 (before the worker registry) is upgraded in place, its tasks kept",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const old = yield* pgStoreAt(schema)
        const receipt = yield* old.submit({ clientRequestId: id("from-v1"), payload: { n: 1 } })
        // What version 1 looked like: no workers table, no provider column, the payload inside the
        // record (none in a column of its own), one migration recorded.
        yield* Effect.promise(() =>
          pgQuery(
            `DROP TABLE "${schema}".workers; DROP INDEX "${schema}".tasks_ready; DROP INDEX "${schema}".tasks_waiting;
             DROP TRIGGER tasks_revision ON "${schema}".tasks; DROP FUNCTION "${schema}".bump_revision();
             UPDATE "${schema}".tasks SET record = (record::jsonb || jsonb_build_object('payload', payload::jsonb))::text;
             ALTER TABLE "${schema}".tasks DROP COLUMN provider, DROP COLUMN revision, DROP COLUMN pending_claim,
               DROP COLUMN payload;
             DELETE FROM "${schema}".migrations WHERE migration_id >= 2`
          )
        )
        const upgraded = yield* pgStoreAt(schema, { hostname: "next", pid: 200 })
        const view = yield* upgraded.read(receipt.task_id, receipt.payload_sha256)
        assert.strictEqual(view.state, "queued")
        const versions = yield* Effect.promise(() =>
          pgQuery<{ readonly migration_id: number }>(
            `SELECT migration_id FROM "${schema}".migrations ORDER BY migration_id`
          )
        )
        assert.deepStrictEqual(
          versions.map((row) => row.migration_id),
          [1, 2, 3, 4, 5, 6]
        )
        // Migration 3 filled in the provider of the task it found queued, so claims find it.
        const claimed = yield* upgraded.claimNext({ workerId: "w", leaseMillis: 60_000, limit: 5 })
        assert.deepStrictEqual(
          claimed.claimed.map((c) => c.record.task_id),
          [receipt.task_id]
        )
        assert.deepStrictEqual(yield* upgraded.workers.list, [])
        // The old row still holds its payload in its record; its first write moves it into the
        // payload column, and the task reads as it did.
        const holder = claimed.claimed[0]
        if (holder === undefined) return assert.fail("not claimed")
        assert.deepStrictEqual(holder.record.payload, { n: 1 })
        assert.strictEqual(
          yield* upgraded.complete(receipt.task_id, holder.lease, { done: true }),
          "complete"
        )
        const row = yield* storedRow(schema, receipt.task_id)
        // Written by this version from the payload it read in the old record.
        assert.strictEqual(row?.payload, JSON.stringify({ n: 1 }))
        assert.notInclude(row?.record ?? "", '"payload":', "the record no longer holds the payload")
        const record = yield* upgraded.record(receipt.task_id)
        assert.deepStrictEqual(record.payload, { n: 1 })
        assert.deepStrictEqual(record.result, { done: true })
      })
  )

  it.scopedLive(
    "a record written whole by a relaykeep older than version 6 still reads, and the next write keeps the payload apart",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const store = yield* pgStoreAt(schema)
        const receipt = yield* store.submit({ clientRequestId: id("whole"), payload: { n: 6 } })
        // What a worker of version 5, still running through the upgrade, writes: the whole record,
        // payload included, into a row whose payload column holds the same payload.
        yield* Effect.promise(() =>
          pgQuery(
            `UPDATE "${schema}".tasks SET record = (record::jsonb || jsonb_build_object('payload', payload::jsonb))::text
             WHERE task_id = $1`,
            [receipt.task_id]
          )
        )
        assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "queued")
        const claimed = yield* store.claimNext({ workerId: "w", leaseMillis: 60_000, limit: 1 })
        const held = claimed.claimed[0]
        if (held === undefined) return assert.fail("not claimed")
        assert.deepStrictEqual(held.record.payload, { n: 6 })
        yield* store.complete(receipt.task_id, held.lease, null)
        const row = yield* storedRow(schema, receipt.task_id)
        assert.strictEqual(
          row?.payload,
          JSON.stringify({ n: 6 }),
          "the payload column as the submission wrote it"
        )
        assert.notInclude(row?.record ?? "", '"payload":')
        assert.deepStrictEqual((yield* store.record(receipt.task_id)).payload, { n: 6 })
      })
  )

  it.scopedLive(
    "a row from before version 6 holding \\u0000 and a lone surrogate takes its writes, and its payload moves to the column",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const store = yield* pgStoreAt(schema)
        const payload = { text: "before\u0000after" }
        const receipt = yield* store.submit({ clientRequestId: id("odd"), payload })
        const retry = { max_attempts: 3, backoff_initial_ms: 0, backoff_max_ms: 0 }
        const first = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000, retry })
        if (Option.isNone(first)) return assert.fail("not claimed")
        // An error message cut in the middle of an emoji keeps half of it: a lone surrogate.
        const cut = "cut at \ud83d"
        assert.strictEqual(
          yield* store.fail(receipt.task_id, first.value.lease, { tag: "X", message: cut, retryable: true }),
          "queued"
        )
        // As a row of version 5 was: the payload inside the record, none in the column.
        yield* Effect.promise(() =>
          pgQuery(
            `UPDATE "${schema}".tasks SET record = left(record, -1) || ',"payload":' || payload || '}', payload = NULL
             WHERE task_id = $1`,
            [receipt.task_id]
          )
        )
        // PostgreSQL's own JSON operators refuse such a record, so the payload cannot be moved in SQL.
        const refused = yield* Effect.promise(() =>
          pgQuery(`SELECT (record::json -> 'payload')::text AS p FROM "${schema}".tasks WHERE task_id = $1`, [
            receipt.task_id
          ]).then(
            () => "accepted",
            (error: unknown) => (error instanceof Error ? error.message : String(error))
          )
        )
        assert.notStrictEqual(refused, "accepted")
        const batch = yield* store.claimNext({ workerId: "w", leaseMillis: 60_000, limit: 1, retry })
        const held = batch.claimed[0]
        if (held === undefined) return assert.fail("not claimed again")
        assert.deepStrictEqual(held.record.payload, payload)
        yield* store.heartbeat(receipt.task_id, held.lease, 60_000)
        yield* store.complete(receipt.task_id, held.lease, { ok: true })
        const row = yield* storedRow(schema, receipt.task_id)
        assert.deepStrictEqual(
          JSON.parse(row?.payload ?? "null"),
          payload,
          "the payload is in its column now"
        )
        assert.notInclude(row?.record ?? "", '"payload":')
        const record = yield* store.record(receipt.task_id)
        assert.deepStrictEqual(record.payload, payload)
        assert.strictEqual(record.attempts[0]?.error?.message, cut)
        assert.strictEqual(record.state, "complete")
      })
  )

  it.scopedLive("a schema at a newer version than this build is refused: upgrade relaykeep", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const first = yield* pgStoreAt(schema)
      const receipt = yield* first.submit({ clientRequestId: id("before"), payload: { n: 1 } })
      yield* Effect.promise(() =>
        pgQuery(`INSERT INTO "${schema}".migrations (migration_id, name) VALUES (999, 'from_the_future')`)
      )
      const refused = yield* Effect.flip(Effect.as(pgStoreAt(schema), "the store opened a newer schema"))
      assert.strictEqual(refused._tag, "StorageError")
      assert.match(refused.message, /version 999/)
      assert.match(refused.message, /upgrade relaykeep/)
      assert.include(refused.message, `schema ${schema}`)
      // Refused without touching anything: the versions and the task are as they were.
      const versions = yield* Effect.promise(() =>
        pgQuery<{ readonly migration_id: number }>(
          `SELECT migration_id FROM "${schema}".migrations ORDER BY migration_id`
        )
      )
      assert.deepStrictEqual(
        versions.map((row) => row.migration_id),
        [1, 2, 3, 4, 5, 6, 999]
      )
      const rows = yield* Effect.promise(() =>
        pgQuery(`SELECT task_id FROM "${schema}".tasks WHERE task_id = $1`, [receipt.task_id])
      )
      assert.lengthOf(rows, 1)
    })
  )

  it.scopedLive("a migration that fails is a StorageError naming it, and leaves the schema as it was", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      // Someone else's table where the first migration creates one.
      yield* Effect.promise(() => pgQuery(`CREATE SCHEMA "${schema}"`))
      yield* Effect.promise(() => pgQuery(`CREATE TABLE "${schema}".tasks (theirs integer)`))
      const refused = yield* Effect.flip(
        Effect.as(pgStoreAt(schema), "the store opened over a foreign table")
      )
      assert.strictEqual(refused._tag, "StorageError")
      assert.match(refused.message, /migrate/)
      assert.match(refused.message, /already exists/)
      // The failed migration rolled back whole: no migrations table, no queues, their table intact.
      const tables = yield* Effect.promise(() =>
        pgQuery<{ readonly table_name: string }>(
          "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
          [schema]
        )
      )
      assert.deepStrictEqual(
        tables.map((row) => row.table_name),
        ["tasks"]
      )
    })
  )

  it.scopedLive("two queues in one schema never see each other's tasks, and key them differently", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const alpha = yield* pgStoreAt(schema, {}, "alpha")
      const beta = yield* pgStoreAt(schema, {}, "beta.2")
      const request = { clientRequestId: id("shared-id"), payload: { n: 1 } }
      const a = yield* alpha.submit(request)
      const b = yield* beta.submit(request)
      assert.notStrictEqual(a.task_id, b.task_id, "each queue has its own key")
      const secrets = yield* Effect.promise(() =>
        pgQuery<{ readonly name: string; readonly secret: string }>(
          `SELECT name, secret FROM "${schema}".queues ORDER BY name`
        )
      )
      assert.deepStrictEqual(
        secrets.map((row) => row.name),
        ["alpha", "beta.2"]
      )
      assert.notStrictEqual(secrets[0]?.secret, secrets[1]?.secret)

      // Alpha cannot read, cancel or claim beta's task, and lists only its own.
      for (const outcome of [
        yield* Effect.either(Effect.asVoid(alpha.read(b.task_id, b.payload_sha256))),
        yield* Effect.either(Effect.asVoid(alpha.cancel(b.task_id, b.payload_sha256))),
        yield* Effect.either(Effect.asVoid(alpha.claim(b.task_id, worker)))
      ]) {
        assert.isTrue(Either.isLeft(outcome) && outcome.left._tag === "UnknownTask", JSON.stringify(outcome))
      }
      assert.deepStrictEqual(
        (yield* alpha.list({})).tasks.map((task) => task.task_id),
        [a.task_id]
      )
      assert.deepStrictEqual((yield* alpha.live).queued, [a.task_id])
      assert.strictEqual((yield* alpha.check).records, 1)

      // A claim in alpha leaves beta's queue as it was.
      const claimed = yield* alpha.claim(a.task_id, worker)
      assert.isTrue(Option.isSome(claimed))
      assert.strictEqual((yield* beta.read(b.task_id, b.payload_sha256)).state, "queued")
      assert.deepStrictEqual((yield* beta.live).queued, [b.task_id])
      assert.deepStrictEqual((yield* beta.live).running, [])
    })
  )

  it.scopedLive("a schema opened again keeps its key: the same request id names the same task", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const request = { clientRequestId: id("kept"), payload: { n: 1 } }
      // Each store is opened and closed in a scope of its own, pool and all.
      const first = yield* Effect.scoped(Effect.flatMap(pgStoreAt(schema), (store) => store.submit(request)))
      const again = yield* Effect.scoped(Effect.flatMap(pgStoreAt(schema), (store) => store.submit(request)))
      assert.deepStrictEqual(again, first, "the identical receipt")
      const other = yield* Effect.scoped(
        Effect.flatMap(pgStoreAt(schema, {}, "other"), (store) => store.submit(request))
      )
      assert.notStrictEqual(other.task_id, first.task_id)
      const later = yield* Effect.scoped(
        Effect.flatMap(pgStoreAt(schema), (store) =>
          Effect.zip(store.read(first.task_id, first.payload_sha256), store.check)
        )
      )
      assert.strictEqual(later[0].state, "queued")
      assert.strictEqual(later[1].records, 1)
    })
  )
})
