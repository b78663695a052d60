/**
 * memory-search: `search` over a memory store of 100,000 synthetic records, through the
 * library's `MemoryStore.search` (what the `relaykeep-memory` server's search tool calls). The
 * store is built as users build one, with `relaykeep memory import`; it is loaded on the first
 * search (not measured), and each later search checks the file is unchanged, as always.
 */
import { memoryStoreLayer } from "../../src/store/memoryLayer.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Layer, ManagedRuntime, Schema } from "effect"
import { statSync, writeFileSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { Host, MemoryStore } from "../../src/index.js"
import type { Benchmark } from "../harness.js"
import { median } from "../harness.js"
import { memoryLines, memoryQueries } from "../memoryCorpus.js"
import { now, runProcess } from "../timing.js"

const Records = 100_000
/** Queries per run: the query list, cycled, with the tool's default limit and its largest. */
const QueriesPerRun = 50
const Limits = [5, 20]

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const relaykeepBin = path.join(repo, "dist", "bin", "relaykeep.js")
const memoryLoad = path.join(repo, "bench", "memoryLoad.ts")

const Usage = Schema.Struct({ rss: Schema.Number, heapUsed: Schema.Number, arrayBuffers: Schema.Number })
const LoadReport = Schema.parseJson(Schema.Struct({ before: Usage, after: Usage, hits: Schema.Number }))

const mib = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10

export const memorySearch: Benchmark = {
  name: "memory-search",
  title: `\`MemoryStore.search\` over a store of ${Records.toLocaleString("en")} synthetic records (imported with \`relaykeep memory import\`), ${QueriesPerRun} queries of one to three words per run, in milliseconds per query (the median of the run).`,
  baseline: "a fixed budget of 50 ms per query",
  unit: "ms per query",
  target: { kind: "under", subject: "relaykeep", limit: 50 },
  setup: async ({ dir }) => {
    const fixture = path.join(dir, "fixture.jsonl")
    const store = path.join(dir, "memory.jsonl")
    writeFileSync(fixture, `${memoryLines(Records).join("\n")}\n`)
    await runProcess(process.execPath, [
      relaykeepBin,
      "memory",
      "import",
      "--store",
      store,
      "--fixture",
      fixture
    ])

    // Memory first, in a process of its own that only loads the store.
    const loadReport = Schema.decodeUnknownSync(LoadReport)(
      (
        await runProcess(process.execPath, ["--expose-gc", "--import", "tsx", memoryLoad, store], {
          cwd: repo
        })
      ).stdout
    )

    const runtime = ManagedRuntime.make(
      memoryStoreLayer(store).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
    )
    const memory = await runtime.runPromise(MemoryStore)
    const loadStart = now()
    await runtime.runPromise(memory.search("warm", 5))
    const loadMillis = now() - loadStart

    const all: Array<number> = []
    const hits = new Map<string, number>()
    return {
      run: async () => {
        const times: Array<number> = []
        for (let n = 0; n < QueriesPerRun; n++) {
          const query = memoryQueries[n % memoryQueries.length] ?? ""
          const limit = Limits[n % Limits.length] ?? 5
          const start = now()
          const found = await runtime.runPromise(memory.search(query, limit))
          times.push(now() - start)
          hits.set(`${query} (limit ${limit})`, found.length)
        }
        all.push(...times)
        return { relaykeep: median(times) }
      },
      details: () => {
        const sorted = [...all].sort((a, b) => a - b)
        const at = (share: number) =>
          Math.round((sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * share))] ?? 0) * 100) /
          100
        return {
          records: Records,
          store_mib: mib(statSync(store).size),
          first_search_with_load_ms: Math.round(loadMillis),
          // A process that only loads the store, after a full garbage collection.
          rss_mib_before_load: mib(loadReport.before.rss),
          rss_mib_after_load: mib(loadReport.after.rss),
          heap_used_mib_after_load: mib(loadReport.after.heapUsed),
          heap_used_mib_of_records: mib(loadReport.after.heapUsed - loadReport.before.heapUsed),
          index_mib: mib(loadReport.after.arrayBuffers - loadReport.before.arrayBuffers),
          query_ms_p95: at(0.95),
          query_ms_max: at(1),
          queries_without_hits: [...hits].filter(([, count]) => count === 0).map(([query]) => query)
        }
      },
      close: () => runtime.dispose()
    }
  }
}
