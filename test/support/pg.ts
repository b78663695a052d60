/**
 * PostgreSQL for tests: `RELAYKEEP_TEST_PG_URL` names the server (CI sets it; see .ci/run).
 * Every test gets a schema of its own, dropped when its scope closes, so tests run in
 * parallel and leave nothing behind.
 */
import { randomUUID } from "node:crypto"
import type { Scope } from "effect"
import { Effect, Layer, Redacted } from "effect"
import pg from "pg"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { buildService } from "./stores.js"
import type { HostOptions } from "./stores.js"
import { pgTaskStoreLayer } from "../../src/store/postgres/layer.js"

export const pgUrl: string | undefined = process.env["RELAYKEEP_TEST_PG_URL"] || undefined

/** `describe.skipIf(!pgAvailable)`: the suites that need PostgreSQL. */
export const pgAvailable = pgUrl !== undefined

const requireUrl = (): string => {
  if (pgUrl === undefined) throw new Error("RELAYKEEP_TEST_PG_URL is not set")
  return pgUrl
}

/** Run one statement on a short-lived connection of its own. */
export const pgQuery = async <Row extends pg.QueryResultRow = pg.QueryResultRow>(
  text: string,
  values: ReadonlyArray<unknown> = []
): Promise<ReadonlyArray<Row>> => {
  const client = new pg.Client({ connectionString: requireUrl() })
  await client.connect()
  try {
    return (await client.query<Row>(text, [...values])).rows
  } finally {
    await client.end()
  }
}

/** A fresh schema name, unique to this test. */
export const freshSchema = (): string => `rk_test_${randomUUID().replaceAll("-", "").slice(0, 20)}`

export const dropSchema = (schema: string) => pgQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)

/** A schema for the test, dropped when the scope closes. */
export const scopedSchema = Effect.acquireRelease(Effect.sync(freshSchema), (schema) =>
  Effect.promise(() => dropSchema(schema))
)

/** A PostgreSQL store on `schema` (and `queue`), opened as a process with the given identity. */
export const pgStoreAt = (schema: string, host: HostOptions = {}, queue?: string) =>
  Effect.tap(
    buildService(
      TaskStore,
      pgTaskStoreLayer({ url: Redacted.make(requireUrl()), schema, queue }).pipe(
        Layer.provide(Host.layerTest(host))
      )
    ),
    (store) => store.check
  )

/** A PostgreSQL store on a schema of its own, dropped when the test's scope closes. */
export const pgStore = (host: HostOptions = {}): Effect.Effect<TaskStoreShape, unknown, Scope.Scope> =>
  Effect.flatMap(scopedSchema, (schema) => pgStoreAt(schema, host))
