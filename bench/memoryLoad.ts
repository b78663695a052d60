/**
 * What a loaded memory store costs in memory: load the store at `argv[2]` through
 * `MemoryStore` (one search loads it and builds its index) and print the process's memory
 * before and after, each after a full garbage collection, as one JSON line.
 *
 * Run: `node --expose-gc --import tsx bench/memoryLoad.ts STORE`. Its own process, so that
 * nothing else the benchmark holds is counted.
 */
import { nodeContextLayer } from "../src/platform/nodeFiles.js"
import { Layer, ManagedRuntime } from "effect"
import { Host, MemoryStore, memoryStoreLayer } from "../src/index.js"

const store = process.argv[2]
if (store === undefined || gc === undefined) {
  process.stderr.write("usage: node --expose-gc --import tsx bench/memoryLoad.ts STORE\n")
  process.exit(2)
}
const collect = gc

const usage = () => {
  collect()
  const { rss, heapUsed, arrayBuffers } = process.memoryUsage()
  return { rss, heapUsed, arrayBuffers }
}

const runtime = ManagedRuntime.make(
  memoryStoreLayer(store).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
)
const memory = await runtime.runPromise(MemoryStore)
const before = usage()
const hits = await runtime.runPromise(memory.search("deploy", 5))
const after = usage()
await runtime.dispose()
process.stdout.write(`${JSON.stringify({ before, after, hits: hits.length })}\n`)
