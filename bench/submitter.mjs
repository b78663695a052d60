/**
 * A submitting process for `submit-concurrent`: the built library as a user's program runs it.
 * It opens the file store, says `ready` on stdout, waits for a line on stdin (so that every
 * process starts submitting at the same moment, its start-up not measured), submits COUNT tasks
 * one after the other, and says `done` once the last receipt is back.
 *
 *   node submitter.mjs ROOT TAG COUNT
 */
import { Layer, ManagedRuntime } from "effect"
import process from "node:process"
import { ClientRequestId, Host, TaskStore, fileTaskStoreLayer, nodeContextLayer } from "../dist/index.js"

const [root, tag, count] = process.argv.slice(2)
const runtime = ManagedRuntime.make(
  fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
)
const store = await runtime.runPromise(TaskStore)
// Opened before the start: the root's layout and secret are not part of what is measured.
await runtime.runPromise(store.counts)
process.stdout.write("ready\n")
process.stdin.once("data", async () => {
  for (let n = 0; n < Number(count); n++) {
    await runtime.runPromise(
      store.submit({
        clientRequestId: ClientRequestId.make(`${tag}-${n}`),
        payload: {
          provider: "echo",
          prompt: `submit ${tag}/${n}: the quick brown fox jumps over the lazy dog`
        }
      })
    )
  }
  process.stdout.write("done\n")
  await runtime.dispose()
  process.exit(0)
})
