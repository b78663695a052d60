/**
 * pass-vs-history: one worker pass over 10 queued echo tasks, on roots that also hold 0, 1,000
 * and 10,000 finished tasks. A pass must cost O(live tasks): the finished ones must not slow it.
 *
 * Each root is a real file store whose finished tasks the store itself wrote (submitted, claimed
 * and completed through the library API, with the echo provider's result). Each run submits 10
 * fresh tasks to every root (not measured), then times `runPass` on each, with the providers the
 * CLI's worker builds. The store of each root stays open across runs, as a worker's does.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Layer, ManagedRuntime } from "effect"
import { mkdirSync, readdirSync } from "node:fs"
import path from "node:path"
import { defaultSettings } from "../../src/providers/settings.js"
import { DefaultLeaseMillis, Host, runPass } from "../../src/index.js"
import type { Benchmark } from "../harness.js"
import { now } from "../timing.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { BenchWorkerId, finishTasks, submitTasks } from "../history.js"
import { providersLayer } from "../../src/providers/layer.js"

/** Queued tasks per pass. */
const Queued = 10
/** Finished tasks already on each root, by series name. */
const Histories = [
  { series: "history-0", finished: 0 },
  { series: "history-1000", finished: 1_000 },
  { series: "history-10000", finished: 10_000 }
] as const
/** A file store over `root` with the providers `relaykeep worker` builds from default settings. */
const openRoot = (root: string) =>
  ManagedRuntime.make(
    Layer.mergeAll(fileTaskStoreLayer({ root }), providersLayer(defaultSettings)).pipe(
      Layer.provideMerge(Host.layer),
      Layer.provide(NodeHttpClient.layer),
      Layer.provide(nodeContextLayer)
    )
  )
type Root = ReturnType<typeof openRoot>

/** Finish `count` tasks the way a worker does: claim, then complete with echo's result. */
const fillHistory = (count: number) =>
  Effect.flatMap(submitTasks("history", count), (ids) => finishTasks(ids))

const pass = runPass({ workerId: BenchWorkerId, leaseMillis: DefaultLeaseMillis })

const countRecords = (root: string) =>
  readdirSync(path.join(root, "tasks")).filter((name) => name.endsWith(".json")).length

export const passVsHistory: Benchmark = {
  name: "pass-vs-history",
  title: `One worker pass (\`runPass\`, echo provider) over ${Queued} queued tasks, on roots that also hold 0, 1,000 and 10,000 finished tasks, in milliseconds per pass.`,
  baseline: "the same pass on a root that holds no finished task",
  unit: "ms per pass",
  target: { kind: "at-most", subject: "history-10000", baseline: "history-0", max: 1.5 },
  setup: async ({ dir, log }) => {
    const roots = new Map<string, { readonly root: string; runtime: Root }>()
    const fillMillis: Record<string, number> = {}
    for (const { series, finished } of Histories) {
      const root = path.join(dir, series)
      mkdirSync(root)
      const runtime = openRoot(root)
      roots.set(series, { root, runtime })
      if (finished === 0) continue
      log(`pass-vs-history: finishing ${finished} tasks on ${series}`)
      const started = now()
      await runtime.runPromise(fillHistory(finished))
      fillMillis[series] = Math.round(now() - started)
    }
    const closeAll = () => Promise.all([...roots.values()].map(({ runtime }) => runtime.dispose()))

    return {
      run: async (index) => {
        const figures: Record<string, number> = {}
        // Rotate the order, so that no series always runs first (or last) in a run.
        const order = Histories.map((_, n) => Histories[(n + index + 1) % Histories.length] ?? Histories[0])
        for (const { series } of order) {
          const entry = roots.get(series)
          if (entry === undefined) throw new Error(`no root for ${series}`)
          if (series === "history-0") {
            // A root with no history stays so: a fresh one for each run.
            await entry.runtime.dispose()
            const root = path.join(dir, `${series}-run${index + 1}`)
            mkdirSync(root)
            roots.set(series, { root, runtime: openRoot(root) })
          }
          const { root, runtime } = roots.get(series) ?? entry
          await runtime.runPromise(submitTasks(`run${index + 1}`, Queued))
          const start = now()
          const report = await runtime.runPromise(pass)
          figures[series] = now() - start
          if (report.dispatched.length !== Queued)
            throw new Error(
              `${series}: the pass ran ${report.dispatched.length} tasks, not ${Queued} (${root})`
            )
        }
        return figures
      },
      details: () => ({
        queued_per_pass: Queued,
        finished_tasks_at_end: Object.fromEntries(
          [...roots].map(([series, { root }]) => [series, countRecords(root)])
        ),
        fill_ms: fillMillis
      }),
      close: async () => {
        await closeAll()
      }
    }
  }
}
