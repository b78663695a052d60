// A submitting process for the shared-fsync chaos test (submitKills.test.ts): the built library
// as a user's program would run it, `lanes` submits at a time on one file store, forever. Each
// receipt is written to stdout (a file) once `submit` has returned it, so every line there was
// acknowledged before the process was killed.
//
//   node submitter.mjs ROOT TAG LANES
import { Layer, ManagedRuntime } from "effect"
import { writeSync } from "node:fs"
import { ClientRequestId, Host, TaskStore, fileTaskStoreLayer, nodeContextLayer } from "../../dist/index.js"

const [root, tag, lanes] = process.argv.slice(2)
const runtime = ManagedRuntime.make(
  fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
)
const store = await runtime.runPromise(TaskStore)
let next = 0
const lane = async () => {
  for (;;) {
    const n = next++
    const receipt = await runtime.runPromise(
      store.submit({
        clientRequestId: ClientRequestId.make(`${tag}-${n}`),
        payload: { provider: "echo", prompt: `chaos ${tag} #${n}` }
      })
    )
    // Synchronous, so that a line is whole on disk before the next submit begins.
    writeSync(1, `${JSON.stringify(receipt)}\n`)
  }
}
await Promise.all(Array.from({ length: Number(lanes) }, lane))
