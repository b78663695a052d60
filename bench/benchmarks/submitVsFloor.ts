/**
 * submit-vs-floor: a durable submit through the library against the least any durable write
 * can cost: the same bytes written to a temp file, fsynced, renamed into place, and the
 * directory fsynced, in the same process.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Layer, ManagedRuntime } from "effect"
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  writeSync
} from "node:fs"
import path from "node:path"
import { ClientRequestId, Host, TaskStore } from "../../src/index.js"
import type { Benchmark } from "../harness.js"
import { now } from "../timing.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"

/** Submits per run, each timed on its own. */
const Submits = 200

/** The floor: one durable replace of `file` with `bytes`. */
const durableWrite = (dir: string, name: string, bytes: Uint8Array) => {
  const temp = path.join(dir, `.${name}.tmp`)
  const fd = openSync(temp, "wx", 0o600)
  try {
    writeSync(fd, bytes)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(temp, path.join(dir, name))
  const dirFd = openSync(dir, "r")
  try {
    fsyncSync(dirFd)
  } finally {
    closeSync(dirFd)
  }
}

const perOperation = (total: number) => total / Submits

export const submitVsFloor: Benchmark = {
  name: "submit-vs-floor",
  title: `Durable submits through the library API (\`TaskStore.submit\` on the file store), ${Submits} per run, in milliseconds per submit.`,
  baseline:
    "the floor: the same record bytes written with write, fsync, rename and a directory fsync in the same process",
  unit: "ms per submit",
  target: { kind: "at-most", subject: "relaykeep", baseline: "floor", max: 2 },
  setup: async ({ dir }) => {
    const root = path.join(dir, "root")
    const floorDir = path.join(dir, "floor")
    mkdirSync(floorDir)
    const runtime = ManagedRuntime.make(
      fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
    )
    const store = await runtime.runPromise(TaskStore)
    const tasksDir = path.join(root, "tasks")

    return {
      run: async (index) => {
        // RelayKeep: fresh request ids, so each submit writes a new record.
        const before = new Set(readdirSafe(tasksDir))
        const start = now()
        for (let n = 0; n < Submits; n++) {
          await runtime.runPromise(
            store.submit({
              clientRequestId: ClientRequestId.make(`bench-${index}-${n}`),
              payload: {
                provider: "echo",
                prompt: `submit ${index}/${n}: the quick brown fox jumps over the lazy dog`
              }
            })
          )
        }
        const relaykeep = perOperation(now() - start)

        // The floor: the very bytes RelayKeep just wrote, one durable replace each.
        const written = readdirSafe(tasksDir)
          .filter((name) => !before.has(name))
          .map((name) => ({ name, bytes: readFileSync(path.join(tasksDir, name)) }))
        if (written.length !== Submits)
          throw new Error(`expected ${Submits} new records, found ${written.length}`)
        const floorStart = now()
        for (const { name, bytes } of written) durableWrite(floorDir, `${index}-${name}`, bytes)
        const floor = perOperation(now() - floorStart)
        return { relaykeep, floor }
      },
      details: () => ({ submits_per_run: Submits }),
      close: () => runtime.dispose()
    }
  }
}

const readdirSafe = (dir: string): Array<string> => {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}
