/**
 * Requirement 8: SIGKILL watching workers at random moments while they run tasks through a fake
 * provider that records each side effect, restart them, and check what is left (the scenario
 * and its checks: killsScenario.ts). Here on the file store: 500 tasks, 100+ kills.
 */
import { describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import { hostFileStoreAt } from "../support/stores.js"
import { runKills } from "./killsScenario.js"
import type { KillsQueue } from "./killsScenario.js"
import { liveMarkers, readRecords } from "./support.js"

const settings = {
  name: "kills",
  context: "file store",
  tasks: 500,
  workers: 3,
  minKills: 100,
  queueDepth: 12,
  lease: "2s",
  killSlack: 5,
  killPhaseMillis: 600_000,
  drainMillis: 240_000
}

/**
 * The real file store over `root`, opened once in this process; the live count and the records
 * read from the files themselves.
 */
const openFileQueue = async (root: string): Promise<KillsQueue> => {
  const scope = await Effect.runPromise(Scope.make())
  const store = await Effect.runPromise(Scope.extend(hostFileStoreAt(root), scope))
  return {
    storeArgs: ["--root", root],
    submit: (id, payload) =>
      Effect.runPromise(store.submit({ clientRequestId: ClientRequestId.make(id), payload })),
    live: () => Promise.resolve(liveMarkers(root)),
    records: () => Promise.resolve(readRecords(root)),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

describe(
  "chaos: SIGKILLed workers",
  { timeout: settings.killPhaseMillis + settings.drainMillis + 300_000 },
  () => {
    it(`${settings.minKills}+ SIGKILLs of ${settings.workers} watching workers across ${settings.tasks} tasks lose nothing`, () =>
      runKills(settings, openFileQueue))
  }
)
