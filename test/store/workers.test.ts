/**
 * The worker registry beyond the contract: what each store does with entries it did not write
 * whole (damaged, foreign, half-written), and the file store's files and modes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { workersOrLeases } from "../../src/worker/registry.js"
import { pgAvailable, pgQuery, pgStoreAt, pgUrl, scopedSchema } from "../support/pg.js"
import { presenceAt } from "../support/presence.js"
import { buildService, fileStoreAt, tempDir } from "../support/stores.js"
import { pgTaskStoreLayer } from "../../src/store/postgres/layer.js"

describe("file store: workers/<instance>.json", () => {
  it.scopedLive("an entry is one whole JSON file, mode 0600, with no temp file left beside it", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const store = yield* fileStoreAt(root)
      const entry = presenceAt("a", "w1", 1_000)
      yield* store.workers.announce(entry)
      yield* store.workers.announce({ ...entry, running: 2 })
      const dir = join(root, "workers")
      assert.deepStrictEqual(readdirSync(dir), [`${"a".repeat(32)}.json`])
      assert.strictEqual(statSync(dir).mode & 0o777, 0o700)
      const file = join(dir, `${"a".repeat(32)}.json`)
      assert.strictEqual(statSync(file).mode & 0o777, 0o600)
      assert.deepStrictEqual(JSON.parse(readFileSync(file, "utf8")), { ...entry, running: 2 })
      yield* store.workers.retire(entry.instance)
      assert.deepStrictEqual(readdirSync(dir), [])
    })
  )

  it.scopedLive(
    "damaged, misfiled and half-written entries are never listed; prune removes them and dead writers' temp files",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        // Our own pid is alive (Host.layerTest): its temp file may be a heartbeat being written.
        const store = yield* fileStoreAt(root, { pid: 4242 })
        const good = presenceAt("a", "w1", 100_000)
        yield* store.workers.announce(good)
        const dir = join(root, "workers")
        const damaged = `${"b".repeat(32)}.json`
        const misfiled = `${"c".repeat(32)}.json`
        writeFileSync(join(dir, damaged), "") // what a crash may leave of a rename never fsynced
        writeFileSync(join(dir, misfiled), JSON.stringify(presenceAt("d", "w2", 100_000)))
        writeFileSync(join(dir, "notes.txt"), "not ours")
        writeFileSync(join(dir, ".tmp-999999-abc"), "{")
        writeFileSync(join(dir, ".tmp-4242-abc"), "{")
        assert.deepStrictEqual(yield* store.workers.list, [good])
        assert.strictEqual(yield* store.workers.prune(0), 2, "the damaged and the misfiled entries")
        assert.deepStrictEqual(readdirSync(dir).sort(), [
          ".tmp-4242-abc",
          `${"a".repeat(32)}.json`,
          "notes.txt"
        ])
        assert.deepStrictEqual(yield* store.workers.list, [good])
      })
  )

  it.scopedLive("a root that never had a worker lists none, and creates nothing to say so", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const store = yield* fileStoreAt(root)
      assert.deepStrictEqual(yield* store.workers.list, [])
      assert.isFalse(existsSync(join(root, "workers")))
      // A retirement with nothing to retire is quiet too.
      yield* store.workers.retire("a".repeat(32))
      mkdirSync(join(root, "workers", "nested"), { recursive: true })
      assert.deepStrictEqual(yield* store.workers.list, [], "a directory inside is not an entry")
    })
  )
})

describe.skipIf(!pgAvailable)("PostgreSQL: the workers table", () => {
  it.scopedLive("a row that does not decode is never listed, and prune removes it", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const store = yield* pgStoreAt(schema)
      const good = presenceAt("a", "w1", 100_000)
      yield* store.workers.announce(good)
      yield* Effect.promise(() =>
        pgQuery(
          `INSERT INTO "${schema}".workers (queue, instance, worker_id, expires_at, presence)
           VALUES ('default', $1, 'w2', '9999-01-01T00:00:00.000Z', '{"not":"a presence"}'),
                  ('default', $2, 'w3', '9999-01-01T00:00:00.000Z', $3)`,
          ["b".repeat(32), "c".repeat(32), JSON.stringify(presenceAt("d", "w3", 100_000))]
        )
      )
      assert.deepStrictEqual(yield* store.workers.list, [good])
      assert.strictEqual(yield* store.workers.prune(0), 2)
      const rows = yield* Effect.promise(() =>
        pgQuery<{ readonly instance: string }>(`SELECT instance FROM "${schema}".workers ORDER BY instance`)
      )
      assert.deepStrictEqual(
        rows.map((row) => row.instance),
        [good.instance]
      )
    })
  )

  it.scopedLive("each queue has its own workers", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const a = yield* pgStoreAt(schema, {}, "a")
      const b = yield* pgStoreAt(schema, {}, "b")
      yield* a.workers.announce(presenceAt("a", "on-a", 1_000))
      yield* b.workers.announce(presenceAt("b", "on-b", 1_000))
      assert.deepStrictEqual(
        (yield* a.workers.list).map((entry) => entry.worker_id),
        ["on-a"]
      )
      assert.strictEqual(yield* a.workers.prune(1e12), 1)
      assert.deepStrictEqual(
        (yield* b.workers.list).map((entry) => entry.worker_id),
        ["on-b"]
      )
    })
  )

  it.scopedLive(
    "a role with rights on the tables of version 1 only: the queue works, the registry says why it cannot",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        yield* pgStoreAt(schema) // the owner migrates the schema to the newest version
        const role = `rk_role_${randomUUID().replaceAll("-", "").slice(0, 12)}`
        yield* Effect.acquireRelease(
          Effect.promise(() =>
            pgQuery(
              `CREATE ROLE ${role} LOGIN;
               GRANT USAGE ON SCHEMA "${schema}" TO ${role};
               GRANT SELECT, INSERT, UPDATE ON "${schema}".tasks, "${schema}".queues, "${schema}".migrations TO ${role}`
            )
          ),
          () => Effect.promise(() => pgQuery(`DROP OWNED BY ${role}; DROP ROLE ${role}`))
        )
        const url = new URL(pgUrl ?? "")
        url.username = role
        const limited = yield* buildService(
          TaskStore,
          pgTaskStoreLayer({ url: Redacted.make(url.toString()), schema }).pipe(
            Layer.provide(Host.layerTest({}))
          )
        )
        const receipt = yield* limited.submit({
          clientRequestId: ClientRequestId.make("limited"),
          payload: {}
        })
        const claimed = yield* limited.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
        assert.isTrue(Option.isSome(claimed), "the queue works")
        const refused = yield* Effect.flip(limited.workers.announce(presenceAt("a", "w", 100_000)))
        assert.strictEqual(refused._tag, "StorageError")
        assert.include(refused.message, "permission denied")
        const report = yield* Effect.provideService(workersOrLeases, TaskStore, limited)
        assert.include(report.registry_error ?? "", "permission denied")
        assert.deepStrictEqual(
          report.workers.map((worker) => [worker.worker_id, worker.state]),
          [["w", "unannounced"]]
        )
      })
  )
})
