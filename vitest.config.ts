import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

// CI asks for a JSON report beside the console one, to print `N passed, N failed`.
const jsonReport = process.env["RELAYKEEP_VITEST_JSON"]

// Most files spend their time waiting on child processes, fsync and timers, not on the CPU, so
// they run a few more at once than there are cores (vitest's default is one less than the cores:
// a single file at a time on a 2-core machine). RELAYKEEP_TEST_WORKERS overrides it.
const asked = process.env["RELAYKEEP_TEST_WORKERS"]
const workers = asked === undefined || asked === "" ? Math.max(2, availableParallelism() + 1) : Number(asked)
if (!Number.isSafeInteger(workers) || workers < 1)
  throw new Error(`RELAYKEEP_TEST_WORKERS must be a whole number from 1, not ${JSON.stringify(asked)}`)

// The long suites that kill, pause and race real processes run apart: `npm run test:chaos`.
const chaos = ["test/chaos/**/*.test.ts"]

// The other files share their worker processes (isolate: false): Effect, the SDK and our own
// modules load once per worker, not once per file, which was a third of the suite's time. These
// hold hundreds of MiB at once (memory stores at their limits), so each runs in a process of its
// own, as a file sharing a worker's heap with them would slow to a crawl.
const alone = [
  "test/store/memoryFile.test.ts",
  "test/store/memoryRows.test.ts",
  "test/domain/memoryIndex.test.ts",
  "test/services/MemoryStore.test.ts"
]

export default defineConfig({
  test: {
    globalSetup: ["test/support/pgGlobalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    maxWorkers: workers,
    minWorkers: 1,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {}),
    projects: [
      {
        extends: true,
        test: { name: "main", include: ["test/**/*.test.ts"], exclude: [...chaos, ...alone], isolate: false }
      },
      { extends: true, test: { name: "main-alone", include: alone } },
      { extends: true, test: { name: "chaos", include: chaos } }
    ]
  }
})
