/**
 * One process of the summary index's cross-process test (test/store/file.summary.test.ts), run
 * with tsx: `summarySubmitter.ts ROOT NAME COUNT`. It submits COUNT tasks to the file store at
 * ROOT (its summary index tuned tiny, so that its journal rotates and its tail compacts), claims
 * and completes every other one, and prints one line per acknowledged submit.
 */
import { Effect, Layer, Option } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"

const [root, name, countText] = process.argv.slice(2)
const count = Number(countText)
if (root === undefined || name === undefined || !Number.isInteger(count))
  throw new Error("usage: summarySubmitter.ts ROOT NAME COUNT")

const submitAll = Effect.gen(function* () {
  const store = yield* TaskStore
  for (let i = 0; i < count; i++) {
    const receipt = yield* store.submit({
      clientRequestId: ClientRequestId.make(`Job-${name}-${i}`),
      payload: i % 2 === 0 ? { i } : { i, provider: "claude" }
    })
    yield* Effect.sync(() => process.stdout.write(`${receipt.task_id}\n`))
    if (i % 2 === 1) continue
    const claimed = yield* store.claim(receipt.task_id, { workerId: name, leaseMillis: 60_000 })
    if (Option.isSome(claimed)) yield* store.complete(receipt.task_id, claimed.value.lease, { name, i })
  }
})

await Effect.runPromise(
  submitAll.pipe(
    Effect.provide(
      fileTaskStoreLayer({
        root,
        summaryIndex: {
          segmentEntries: 3,
          compactAtEntries: 5,
          compactAtJournals: 2,
          journalRotateBytes: 600
        }
      }).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
    )
  )
)
