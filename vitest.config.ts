import { availableParallelism } from "node:os"
import { defineConfig } from "vitest/config"

// CI asks for a JSON report beside the console one, to print `N passed, N failed`.
const jsonReport = process.env["RELAYKEEP_VITEST_JSON"]

// A file often waits on child processes, fsync and timers, so a few more run at once than there
// are cores, which keeps every core busy (vitest's default is one less than the cores: a single
// file at a time on a 2-core machine). RELAYKEEP_TEST_WORKERS overrides it.
const asked = process.env["RELAYKEEP_TEST_WORKERS"]
const workers = asked === undefined || asked === "" ? Math.max(2, availableParallelism() + 1) : Number(asked)
if (!Number.isSafeInteger(workers) || workers < 1)
  throw new Error(`RELAYKEEP_TEST_WORKERS must be a whole number from 1, not ${JSON.stringify(asked)}`)

// The long suites that kill, pause and race real processes run apart: `npm run test:chaos`.
const chaos = ["test/chaos/**/*.test.ts"]

// The other files share their worker processes: a worker runs one file after another, so Effect,
// the SDK and our own modules load once per worker and no process is started per file. Whether the
// forks pool starts a process per file is vitest's root setting, poolOptions.forks.isolate, whatever
// a project says; a project's `isolate` only says whether modules are loaded again between files.
// The memory-store files below hold hundreds of MiB at once (stores at their limits), which a
// shared worker would carry into the files after them, so they run in the threads pool instead:
// one at a time, beside the forks, each in a thread and a heap of its own.
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
    // As many as at most: with shared workers, tinypool retiring an idle worker above the minimum
    // while vitest recycles it fails the run ("Terminating worker thread"). So a command line that
    // sets --maxWorkers sets --minWorkers too (or use RELAYKEEP_TEST_WORKERS).
    minWorkers: workers,
    // The chaos suites ask for a process per file again (test:chaos in package.json).
    poolOptions: { forks: { isolate: false }, threads: { maxThreads: 1, minThreads: 1 } },
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {}),
    projects: [
      {
        extends: true,
        test: { name: "main", include: ["test/**/*.test.ts"], exclude: [...chaos, ...alone], isolate: false }
      },
      { extends: true, test: { name: "main-alone", include: alone, pool: "threads" } },
      { extends: true, test: { name: "chaos", include: chaos } }
    ]
  }
})
