/**
 * worker-overhead: 1,000 echo tasks through the real CLI, `relaykeep worker --watch
 * --concurrency 4`, end to end, against the provider's own time for the same tasks.
 *
 * Each run submits 1,000 tasks to a fresh root through the library (not measured), starts the
 * worker, and times from the moment it reports it is watching until the store holds no live
 * task (its index of queued and running tasks is empty: a marker goes only after its record was
 * written complete); then stops it with SIGTERM and checks every task completed in one attempt.
 *
 * The echo provider's own time is not in the records (echo returns at once and leaves no
 * attempt receipt; an attempt's started_at and ended_at span the claim to the completed
 * record, the worker's work included). So `provider_sum` is measured here: the same Provider
 * running the same 1,000 payloads in this process, each call timed.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Effect, Layer, ManagedRuntime, Schema } from "effect"
import { spawn } from "node:child_process"
import { readdirSync } from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import type { Receipt } from "../../src/index.js"
import { ClientRequestId, Host, Provider, TaskStore, timeMillis } from "../../src/index.js"
import type { Benchmark } from "../harness.js"
import { median } from "../harness.js"
import { now } from "../timing.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { echoProviderLayer } from "../../src/providers/layer.js"

const Tasks = 1000
const Concurrency = 4
/** Longest a run may take before it counts as stuck. */
const StuckAfterMillis = 300_000
/** How often the store's index is looked at while the worker runs (two readdir calls). */
const WatchEveryMillis = 5

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const relaykeepBin = path.join(repo, "dist", "bin", "relaykeep.js")

const workerEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("RELAYKEEP_")))

/** No `provider` key: the built-in echo provider (`fake-echo`) takes such payloads. */
const payloadOf = (run: number, n: number) => ({
  prompt: `task ${run}/${n}: the quick brown fox jumps over the lazy dog`
})

const WatchSummary = Schema.parseJson(Schema.Struct({ reason: Schema.String, finished: Schema.Number }))

const sleep = (millis: number) => new Promise((resolve) => setTimeout(resolve, millis))

/** Live tasks by the store's index (`index/queued`, `index/running`; docs/file-store.md). */
const liveMarkers = (root: string) =>
  ["queued", "running"].reduce((sum, state) => sum + readdirSync(path.join(root, "index", state)).length, 0)

/** Resolves with the time at which the store first holds no live task. */
const waitUntilNoLiveTask = async (root: string, start: number): Promise<number> => {
  while (liveMarkers(root) > 0) {
    if (now() - start > StuckAfterMillis) throw new Error(`tasks still live after ${StuckAfterMillis} ms`)
    await sleep(WatchEveryMillis)
  }
  return now()
}

interface Worker {
  /** Resolves at the worker's `watching` event: its layers are built and it looks at the queue. */
  readonly watching: Promise<number>
  /** SIGTERM (a drain), then its summary once it has exited 0. */
  readonly stop: () => Promise<typeof WatchSummary.Type>
}

const startWorker = (root: string): Worker => {
  const child = spawn(
    process.execPath,
    [relaykeepBin, "worker", "--watch", "--concurrency", String(Concurrency), "--root", root],
    { env: workerEnv(), stdio: ["ignore", "pipe", "pipe"] }
  )
  let stdout = ""
  let stderr = ""
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (code) => resolve(code))
  })
  const watching = new Promise<number>((resolve, reject) => {
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
      if (/ watching: /.test(stderr)) resolve(now())
    })
    void exited.then((code) => reject(new Error(`worker exited with ${code} before watching: ${stderr}`)))
  })
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
  return {
    watching,
    stop: async () => {
      child.kill("SIGTERM")
      const code = await exited
      if (code !== 0) throw new Error(`worker exited with ${code}: ${stderr.slice(-2000)}`)
      return Schema.decodeUnknownSync(WatchSummary)(stdout.trim())
    }
  }
}

export const workerOverhead: Benchmark = {
  name: "worker-overhead",
  title: `${Tasks.toLocaleString("en")} echo tasks through \`relaykeep worker --watch --concurrency ${Concurrency}\` (the CLI), from the worker's start to the last task complete (\`wall\`, ms per run), and the overhead per task it judges: (wall × ${Concurrency} − provider_sum) / ${Tasks}, the worker's slot time not spent in the provider (ms per task).`,
  baseline:
    "provider_sum: the echo provider's own time for the same 1,000 tasks (the records do not hold it for echo, which leaves no receipt; it is measured by running the same Provider on the same payloads in process)",
  unit: "ms",
  target: { kind: "under", subject: "overhead_per_task", limit: 10 },
  setup: async ({ dir, log }) => {
    const provider = ManagedRuntime.make(echoProviderLayer)
    const runs: Array<{ wall: number; providerSum: number; attemptSum: number; startMillis: number }> = []

    return {
      run: async (index) => {
        const root = path.join(dir, `run-${index + 1}`)
        const store = ManagedRuntime.make(
          fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
        )
        try {
          log(`worker-overhead: submitting ${Tasks} tasks`)
          const receipts: ReadonlyArray<Receipt> = await store.runPromise(
            Effect.flatMap(TaskStore, (tasks) =>
              Effect.forEach(
                Array.from({ length: Tasks }, (_, n) => n),
                (n) =>
                  tasks.submit({
                    clientRequestId: ClientRequestId.make(`bench-${index + 1}-${n}`),
                    payload: payloadOf(index + 1, n)
                  }),
                { concurrency: 8 }
              )
            )
          )

          const spawned = now()
          const worker = startWorker(root)
          const start = await worker.watching
          // However the watch ends, the worker is stopped (and drained) before anything is thrown.
          const ended = await waitUntilNoLiveTask(root, start).then(
            (end) => ({ end }),
            (error: unknown) => ({ error })
          )
          const summary = await worker.stop()
          if ("error" in ended) throw ended.error
          if (summary.finished !== Tasks)
            throw new Error(`the worker finished ${summary.finished} tasks, not ${Tasks}`)
          const end = ended.end

          // Every task complete, in one attempt; the attempts' own spans, for the details.
          const views = await store.runPromise(
            Effect.flatMap(TaskStore, (tasks) =>
              Effect.forEach(receipts, (receipt) => tasks.read(receipt.task_id, receipt.payload_sha256))
            )
          )
          let attemptSum = 0
          for (const view of views) {
            const attempt = view.attempts[0]
            if (view.state !== "complete" || view.attempts.length !== 1 || attempt?.ended_at == null)
              throw new Error(`task ${view.task_id} is ${view.state} after ${view.attempts.length} attempts`)
            attemptSum += timeMillis(attempt.ended_at) - timeMillis(attempt.started_at)
          }

          // The provider's own time: the same payloads through the same Provider, each call timed.
          const providerSum = await provider.runPromise(
            Effect.flatMap(Provider, (echo) =>
              Effect.reduce(views, 0, (sum, view, n) =>
                Effect.suspend(() => {
                  const began = now()
                  return Effect.map(
                    echo.run({ taskId: view.task_id, attempt: 1, payload: payloadOf(index + 1, n) }),
                    () => sum + (now() - began)
                  )
                })
              )
            )
          )
          const wall = end - start
          runs.push({ wall, providerSum, attemptSum, startMillis: start - spawned })
          return {
            wall,
            provider_sum: providerSum,
            overhead_per_task: (wall * Concurrency - providerSum) / Tasks
          }
        } finally {
          await store.dispose()
        }
      },
      details: () => {
        const wall = median(runs.map((run) => run.wall))
        const providerSum = median(runs.map((run) => run.providerSum))
        const round = (value: number) => Math.round(value * 100) / 100
        return {
          tasks: Tasks,
          concurrency: Concurrency,
          tasks_per_second: round((Tasks / wall) * 1000),
          overhead_per_task_ms: round((wall * Concurrency - providerSum) / Tasks),
          attempt_ms_per_task: round(median(runs.map((run) => run.attemptSum)) / Tasks),
          worker_start_to_watching_ms: Math.round(median(runs.map((run) => run.startMillis)))
        }
      },
      close: () => provider.dispose()
    }
  }
}
