/**
 * claim-vs-depth: `relaykeep worker --limit 1000` (the built CLI, the echo provider, a child
 * process timed from spawn to exit) from a queue that holds just those 1,000 tasks, against
 * the same from a deep queue: 100,000 queued tasks on PostgreSQL, 20,000 on the file store.
 * Workers claim with `TaskStore.claimNext`, so a claim must cost what the store pays for the
 * task it takes, whatever waits behind it.
 *
 * Setup (not measured) fills the deep queues. The file store's through the library's own
 * `submit`, many at once; PostgreSQL's through the path `relaykeep migrate` takes
 * (`importRecords`: records made by `Transitions.newRecord` under the queue's key, inserted as
 * `rowOf` rows, 500 to a statement, and read back), because 100,000 submissions one statement
 * each take minutes here. Each run then submits 1,000 fresh tasks to every queue through the
 * library (not measured), so the shallow queues hold 1,000 and the deep ones keep their depth,
 * runs the worker on each, and checks that it ran 1,000 tasks and left what it should.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Effect, Either, Layer, ManagedRuntime, Redacted, Schema } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { mkdirSync, readdirSync } from "node:fs"
import path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { JsonObject } from "../../src/domain/Task.js"
import * as Transitions from "../../src/domain/transitions.js"
import { Host, TaskStore } from "../../src/index.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { importRecords } from "../../src/store/postgres/importer.js"
import { pgTaskStoreLayer } from "../../src/store/postgres/layer.js"
import { pgTarget } from "../../src/store/postgres/target.js"
import type { Benchmark } from "../harness.js"
import { median } from "../harness.js"
import { benchPgUrl, withPg } from "../postgres.js"
import { now, runProcess } from "../timing.js"

/** Tasks each worker run takes (`--limit`), and tasks a shallow queue holds. */
const Limit = 1_000
/** Queued tasks behind the worker in a deep queue, by store. */
const Depth = { pg: 100_000, file: 20_000 } as const
/** Submissions in flight while a queue is filled or topped up. */
const FillConcurrency = 16
/** Connections the bench's own PostgreSQL stores open. */
const FillConnections = 8

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const relaykeepBin = path.join(repo, "dist", "bin", "relaykeep.js")
/** Makes the worker write its own CPU time on stderr as it exits (reported, not judged). */
const cpuAtExit = pathToFileURL(path.join(repo, "bench", "cpuAtExit.mjs")).href

/** The user's environment without variables that pick a store or a root. */
const workerEnv = (): NodeJS.ProcessEnv =>
  Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("RELAYKEEP_")))

/** No `provider` key: the built-in echo provider takes such payloads. */
const payloadOf = (label: string): JsonObject => ({
  prompt: `${label}: the quick brown fox jumps over the lazy dog`
})

/** What the one-shot worker prints (its PassReport), as far as this benchmark checks it. */
const PassSummary = Schema.parseJson(
  Schema.Struct({
    dispatched: Schema.Array(Schema.String),
    lost: Schema.Array(Schema.String),
    limit_reached: Schema.Boolean
  })
)

type Store = "pg" | "file"
type Depthness = "shallow" | "deep"

interface Queue {
  readonly store: Store
  readonly depth: Depthness
  readonly series: string
  /** The worker's store flags. */
  readonly args: ReadonlyArray<string>
  readonly runtime: ManagedRuntime.ManagedRuntime<TaskStore, unknown>
  /** Queued tasks, counted straight from the store's files or table. */
  readonly queued: () => Promise<number>
  /** Make the deep queue (setup). */
  readonly fill: (count: number) => Promise<void>
  readonly close: () => Promise<void>
}

/** Submit `count` tasks labelled `label` through the library, many at once. */
const submitTasks = (
  runtime: ManagedRuntime.ManagedRuntime<TaskStore, unknown>,
  label: string,
  count: number
) =>
  runtime.runPromise(
    Effect.flatMap(TaskStore, (store) =>
      Effect.forEach(
        Array.from({ length: count }, (_, n) => n),
        (n) =>
          store.submit({
            clientRequestId: ClientRequestId.make(`${label}-${n}`),
            payload: payloadOf(`${label}/${n}`)
          }),
        { concurrency: FillConcurrency, discard: true }
      )
    )
  )

const fileQueue = (dir: string, depth: Depthness): Queue => {
  const root = path.join(dir, `file-${depth}`)
  mkdirSync(root)
  const runtime = ManagedRuntime.make(
    fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
  )
  return {
    store: "file",
    depth,
    series: `file.${depth}`,
    args: ["--root", root],
    runtime,
    // The index holds one marker per queued task (docs/file-store.md).
    queued: async () => readdirSync(path.join(root, "index", "queued")).length,
    fill: (count) => submitTasks(runtime, "deep", count),
    close: () => runtime.dispose()
  }
}

const pgQueue = (dir: string, depth: Depthness): Queue => {
  const schema = `bench_depth_${depth}_${randomUUID().replaceAll("-", "").slice(0, 12)}`
  // An empty data root: the worker reads its provider settings there, never from $HOME.
  const root = path.join(dir, `pg-${depth}-root`)
  mkdirSync(root)
  const runtime = ManagedRuntime.make(
    pgTaskStoreLayer({ url: Redacted.make(benchPgUrl), schema, maxConnections: FillConnections }).pipe(
      Layer.provide(Host.layer),
      Layer.provide(nodeContextLayer)
    )
  )
  return {
    store: "pg",
    depth,
    series: `pg.${depth}`,
    args: ["--store", benchPgUrl, "--pg-schema", schema, "--queue", "default", "--root", root],
    runtime,
    queued: () =>
      withPg(async (client) => {
        const result = await client.query<{ readonly n: string }>(
          `SELECT count(*) AS n FROM "${schema}".tasks WHERE queue = 'default' AND state = 'queued'`
        )
        return Number(result.rows[0]?.n ?? Number.NaN)
      }),
    fill: async (count) => {
      const report = await importQueued(schema, count)
      if (report.copied !== count) throw new Error(`imported ${report.copied} of ${count}`)
    },
    close: async () => {
      await runtime.dispose()
      await withPg((client) => client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`))
    }
  }
}

/**
 * `count` queued tasks into a new PostgreSQL queue, as `relaykeep migrate` copies them: real
 * records under a fresh key, which the queue adopts, then read back and compared.
 */
const importQueued = (schema: string, count: number) => {
  const target = pgTarget({ url: Redacted.make(benchPgUrl), schema })
  if (Either.isLeft(target)) throw new Error(`bad PostgreSQL target: ${target.left.message}`)
  const secret = new Uint8Array(randomBytes(32))
  const start = Date.now()
  const records = Array.from({ length: count }, (_, n) => {
    const clientRequestId = ClientRequestId.make(`deep-${n}`)
    const payload = payloadOf(`deep/${n}`)
    return Transitions.newRecord({
      taskId: Transitions.taskIdFor(secret, clientRequestId),
      clientRequestId,
      payload,
      payloadSha256: Transitions.payloadSha256(payload),
      // A millisecond apart, in order, as a steady stream of submissions would be.
      now: start - count + n
    })
  })
  return Effect.runPromise(
    Effect.scoped(importRecords(target.right, secret, records, { maxConnections: FillConnections }))
  )
}

/**
 * Run the worker once on `queue` and check it ran `Limit` tasks; its wall time and its own CPU
 * time, in ms.
 */
const runWorker = async (queue: Queue): Promise<{ readonly wall: number; readonly cpu: number }> => {
  const exited = await runProcess(
    process.execPath,
    ["--import", cpuAtExit, relaykeepBin, "worker", "--limit", String(Limit), ...queue.args],
    { env: workerEnv() }
  )
  const cpu = Number(/^bench-cpu-ms ([\d.]+)$/m.exec(exited.stderr)?.[1])
  if (Number.isNaN(cpu)) throw new Error(`${queue.series}: the worker did not report its CPU time`)
  const summary = Schema.decodeUnknownSync(PassSummary)(exited.stdout.trim())
  if (summary.dispatched.length !== Limit || summary.lost.length > 0 || !summary.limit_reached)
    throw new Error(
      `${queue.series}: the worker ran ${summary.dispatched.length} tasks (lost ${summary.lost.length}), not ${Limit}`
    )
  return { wall: exited.millis, cpu }
}

/**
 * The queues in the order run `index` takes them. The two of a store run one after the other,
 * so that both meet the same minute of a busy machine; which of them goes first alternates
 * from run to run (a run right after the top-up meets fresher pages than the next), and which
 * store goes first alternates every second run.
 */
const runOrder = (queues: ReadonlyArray<Queue>, index: number): ReadonlyArray<Queue> => {
  const n = index + 1
  const depths: ReadonlyArray<Depthness> = n % 2 === 0 ? ["shallow", "deep"] : ["deep", "shallow"]
  const stores: ReadonlyArray<Store> = Math.floor(n / 2) % 2 === 0 ? ["pg", "file"] : ["file", "pg"]
  return stores.flatMap((store) =>
    depths.flatMap((depth) => queues.filter((queue) => queue.store === store && queue.depth === depth))
  )
}

const expectedAfterRun = (queue: Queue) => (queue.depth === "shallow" ? 0 : Depth[queue.store])

export const claimVsDepth: Benchmark = {
  name: "claim-vs-depth",
  title: `\`relaykeep worker --limit ${Limit}\` (the CLI, echo provider, one process timed from spawn to exit) from a queue of ${Limit.toLocaleString("en")} queued tasks, and from a queue of ${Depth.pg.toLocaleString("en")} (PostgreSQL) or ${Depth.file.toLocaleString("en")} (file store), in milliseconds per run.`,
  baseline: `the same worker run on the same store from a queue that holds only the ${Limit.toLocaleString("en")} tasks it runs`,
  unit: "ms per run",
  target: {
    kind: "each-at-most",
    pairs: [
      { subject: "pg.deep", baseline: "pg.shallow", max: 1.25 },
      { subject: "file.deep", baseline: "file.shallow", max: 1.5 }
    ]
  },
  setup: async ({ dir, log }) => {
    const queues: Array<Queue> = []
    const closeAll = () => Promise.all(queues.map((queue) => queue.close()))
    const fillMillis: Record<string, number> = {}
    const runs: Array<Record<string, number>> = []
    const cpuRuns: Array<Record<string, number>> = []
    try {
      for (const store of ["pg", "file"] as const)
        for (const depth of ["shallow", "deep"] as const)
          queues.push(store === "pg" ? pgQueue(dir, depth) : fileQueue(dir, depth))
      for (const queue of queues) {
        // Opened before the fill, as a worker would find it; but a PostgreSQL queue that is to
        // take the imported key must not exist before the import (it would make its own).
        if (queue.depth === "shallow" || queue.store === "file")
          await queue.runtime.runPromise(Effect.flatMap(TaskStore, (store) => store.check))
        if (queue.depth === "shallow") continue
        const count = Depth[queue.store]
        log(`claim-vs-depth: filling ${queue.series} with ${count} queued tasks`)
        const started = now()
        await queue.fill(count)
        fillMillis[queue.series] = Math.round(now() - started)
        const queued = await queue.queued()
        if (queued !== count) throw new Error(`${queue.series} holds ${queued} queued tasks, not ${count}`)
      }
    } catch (error) {
      await closeAll()
      throw error
    }

    return {
      run: async (index) => {
        const label = `run${index + 2}`
        const figures: Record<string, number> = {}
        const cpu: Record<string, number> = {}
        for (const queue of queues) await submitTasks(queue.runtime, label, Limit)
        for (const queue of runOrder(queues, index)) {
          const measured = await runWorker(queue)
          figures[queue.series] = measured.wall
          cpu[queue.series] = measured.cpu
          const left = await queue.queued()
          if (left !== expectedAfterRun(queue))
            throw new Error(
              `${queue.series}: ${left} tasks queued after the run, not ${expectedAfterRun(queue)}`
            )
        }
        if (index >= 0) {
          runs.push(figures)
          cpuRuns.push(cpu)
        }
        return figures
      },
      details: () => {
        const medianOf = (over: ReadonlyArray<Record<string, number>>) => (series: string) =>
          median(over.flatMap((figures) => figures[series] ?? []))
        const of = medianOf(runs)
        const cpuOf = medianOf(cpuRuns)
        const round = (value: number) => Math.round(value * 100) / 100
        const allSeries = ["pg.shallow", "pg.deep", "file.shallow", "file.deep"]
        return {
          tasks_per_run: Limit,
          deep_queue: { pg: Depth.pg, file: Depth.file },
          ratios: {
            pg: round(of("pg.deep") / of("pg.shallow")),
            file: round(of("file.deep") / of("file.shallow"))
          },
          ms_per_task: Object.fromEntries(allSeries.map((series) => [series, round(of(series) / Limit)])),
          worker_cpu_ms: Object.fromEntries(allSeries.map((series) => [series, Math.round(cpuOf(series))])),
          worker_cpu_ratios: {
            pg: round(cpuOf("pg.deep") / cpuOf("pg.shallow")),
            file: round(cpuOf("file.deep") / cpuOf("file.shallow"))
          },
          worker_cpu:
            "the worker process's own user and system CPU time (process.cpuUsage at exit, through a preload: bench/cpuAtExit.mjs), median per series; PostgreSQL's own work is not in it",
          fill_ms: fillMillis,
          fill: `file: TaskStore.submit, ${FillConcurrency} in flight; PostgreSQL: the migrate path (importRecords: Transitions.newRecord records, rowOf rows, 500 per INSERT, read back); each run tops every queue up with ${Limit} submissions, not measured`
        }
      },
      close: async () => {
        await closeAll()
      }
    }
  }
}
