/**
 * Issue 6, point 6: the SIGKILL scenario of killsScenario.ts on PostgreSQL, smaller: watching
 * workers on one queue, SIGKILLed and replaced, lose nothing, run no attempt twice, and leave
 * no damaged row.
 */
import { afterAll, describe, it } from "@effect/vitest"
import { dropSchema, freshSchema, pgAvailable } from "../support/pg.js"
import { runKills } from "./killsScenario.js"
import type { KillsQueue } from "./killsScenario.js"
import { openPgQueue, pgStoreArgs, readPgRecords } from "./support.js"

const schema = freshSchema()
const settings = {
  name: "pg.kills",
  context: `schema ${schema}`,
  tasks: 120,
  workers: 3,
  minKills: 30,
  queueDepth: 10,
  lease: "3s",
  killSlack: 3,
  killPhaseMillis: 240_000,
  drainMillis: 90_000
}

/** The queue through the real store; the live count and the records straight from the table. */
const openQueue = async (root: string): Promise<KillsQueue> => {
  const queue = await openPgQueue(schema)
  return {
    storeArgs: [...pgStoreArgs(schema), "--root", root, "--pg-pool", "3"],
    submit: queue.submit,
    live: queue.live,
    records: () => readPgRecords(schema),
    close: queue.close
  }
}

describe.skipIf(!pgAvailable)(
  "PostgreSQL: SIGKILLed workers",
  { timeout: settings.killPhaseMillis + settings.drainMillis + 120_000 },
  () => {
    afterAll(() => dropSchema(schema))

    it(`${settings.minKills}+ SIGKILLs of ${settings.workers} watching workers across ${settings.tasks} tasks lose nothing`, () =>
      runKills(settings, openQueue))
  }
)
