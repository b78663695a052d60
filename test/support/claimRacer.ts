/**
 * One racer of the claimNext race (test/chaos/claimNextRace.test.ts), run as a process of its
 * own with tsx: `claimRacer.ts SEED --root ROOT` or `claimRacer.ts SEED --pg URL SCHEMA`.
 *
 * It opens the store, prints `{"ready":true}`, and waits for a line on stdin, so that every
 * racer starts at once. Then it loops `claimNext({ limit: k })` with k drawn from 1 to 8 (from
 * SEED, so a failing run can be replayed), completes every task it claimed, and prints one
 * JSON line per claim (`{"task_id","attempt"}`), until a claim finds nothing ready; then
 * `{"done":true,"claims":N,"batches":M}`. A claim that finds nothing ends the loop: a claimed
 * task is never given back here, so nothing can become ready again.
 */
import type { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Effect, Layer, Random, Redacted } from "effect"
import { createInterface } from "node:readline"
import type { InvalidInput, StorageError } from "../../src/domain/errors.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { pgTaskStoreLayer } from "../../src/store/postgres/layer.js"

/** The largest batch a racer asks for. */
const MaxBatch = 8

const [seedText, kind, first, second] = process.argv.slice(2)
const seed = Number(seedText)
if (!Number.isInteger(seed)) throw new Error(`usage: claimRacer.ts SEED (--root ROOT | --pg URL SCHEMA)`)

const storeLayer:
  Layer.Layer<TaskStore, StorageError | InvalidInput, FileSystem.FileSystem | Path.Path | Host> | undefined =
  kind === "--root" && first !== undefined
    ? fileTaskStoreLayer({ root: first })
    : kind === "--pg" && first !== undefined && second !== undefined
      ? pgTaskStoreLayer({ url: Redacted.make(first), schema: second, maxConnections: 2 })
      : undefined
if (storeLayer === undefined) throw new Error(`usage: claimRacer.ts SEED (--root ROOT | --pg URL SCHEMA)`)

const line = (value: unknown) => Effect.sync(() => process.stdout.write(`${JSON.stringify(value)}\n`))

/** Resolves at the first line on stdin: the signal to start. */
const go = Effect.async<void>((resume) => {
  const lines = createInterface({ input: process.stdin })
  lines.once("line", () => {
    lines.close()
    resume(Effect.void)
  })
})

const race = Effect.gen(function* () {
  const store = yield* TaskStore
  const host = yield* Host
  const workerId = `racer-${seed}:${host.pid}`
  // Opened (and for PostgreSQL, migrated) before the start, so that all racers start level.
  yield* store.check
  yield* line({ ready: true })
  yield* go
  let claims = 0
  let batches = 0
  for (;;) {
    const limit = yield* Random.nextIntBetween(1, MaxBatch + 1)
    const batch = yield* store.claimNext({ workerId, leaseMillis: 60_000, limit })
    if (batch.claimed.length === 0) break
    batches += 1
    for (const claimed of batch.claimed) {
      claims += 1
      yield* line({ task_id: claimed.record.task_id, attempt: claimed.lease.attempt })
    }
    for (const { record, lease } of batch.claimed)
      yield* store.complete(record.task_id, lease, { racer: seed, payload: record.payload })
  }
  yield* line({ done: true, claims, batches })
})

await Effect.runPromise(
  race.pipe(
    Effect.withRandom(Random.make(seed)),
    Effect.provide(storeLayer.pipe(Layer.provideMerge(Host.layer), Layer.provide(nodeContextLayer)))
  )
)
