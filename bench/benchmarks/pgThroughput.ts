/**
 * pg-throughput: RelayKeep's PostgreSQL store against pg-boss 10 and graphile-worker 0.17 on
 * the same database, in the same run, each in a fresh schema of its own that is dropped after
 * the run. For each system, two phases:
 *
 * - enqueue: N jobs, one at a time through the system's normal API (`TaskStore.submit`,
 *   pg-boss `send`, graphile-worker `addJob` on a shared pool), `Concurrency` calls in flight;
 * - process: the system's own worker, with `Concurrency` jobs at once and a handler that
 *   returns at once, from its start until every job is recorded as finished in the database.
 *
 * Every system gets a pool of `Concurrency` connections for its queries. The end of the
 * process phase is judged the same way for all three: a count in the database, every few ms.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Effect, Fiber, Layer, ManagedRuntime, Redacted } from "effect"
import { Logger as GraphileLogger, makeWorkerUtils, run as runGraphile, runMigrations } from "graphile-worker"
import pg from "pg"
import PgBoss from "pg-boss"
import { randomUUID } from "node:crypto"
import { ClientRequestId, Host, Shutdown, TaskStore } from "../../src/index.js"
import { DefaultCancelPollMillis } from "../../src/worker/attempt.js"
import { workerOutputLayer } from "../../src/worker/events.js"
import {
  DefaultGraceMillis,
  DefaultHeartbeatMillis,
  DefaultPollMillis,
  runWatch
} from "../../src/worker/watch.js"
import { DefaultRetryPolicy } from "../../src/domain/Task.js"
import type { Benchmark, Figures } from "../harness.js"
import { benchPgUrl, withPg } from "../postgres.js"
import { now } from "../timing.js"
import { pgTaskStoreLayer } from "../../src/store/postgres/layer.js"
import { providerRegistryLayer } from "../../src/providers/layer.js"

/** Jobs per phase per system. */
export const Jobs = 2_000
/** Calls in flight while enqueueing, jobs run at once while processing, connections per pool. */
const Concurrency = 10
/** How often the database is asked whether every job is finished. */
const DonePollMillis = 5
/** A run that takes longer than this is broken, not slow. */
const PhaseTimeoutMillis = 300_000

const payloadOf = (run: number, n: number) => ({
  provider: "noop",
  prompt: `job ${run}/${n}: the quick brown fox jumps over the lazy dog`
})

/** Run `work(0) … work(total - 1)` with `concurrency` of them in flight at once. */
const inFlight = async (total: number, concurrency: number, work: (n: number) => Promise<unknown>) => {
  let next = 0
  const lane = async () => {
    while (next < total) await work(next++)
  }
  await Promise.all(Array.from({ length: concurrency }, lane))
}

/** Wait until `query` counts every job finished, asking every DonePollMillis. */
const untilFinished = async (client: pg.Client, query: string, values: ReadonlyArray<unknown>) => {
  const deadline = now() + PhaseTimeoutMillis
  for (;;) {
    const result = await client.query<{ readonly finished: string }>(query, [...values])
    if (Number(result.rows[0]?.finished ?? 0) >= Jobs) return
    if (now() > deadline) throw new Error(`not finished after ${PhaseTimeoutMillis} ms: ${query}`)
    await new Promise((resolve) => setTimeout(resolve, DonePollMillis))
  }
}

const rate = (millis: number) => Jobs / (millis / 1000)

export interface Phases {
  readonly enqueue: number
  readonly process: number
}

const freshSchema = (system: string) => `bench_${system}_${randomUUID().replaceAll("-", "").slice(0, 12)}`
const dropSchema = (schema: string) =>
  withPg((client) => client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`))

/** What bench/profile.ts runs around a phase, to profile it alone. */
export interface PhaseHooks {
  readonly beforeEnqueue?: () => Promise<void>
  readonly afterEnqueue?: () => Promise<void>
  readonly beforeProcess?: () => Promise<void>
  readonly afterProcess?: () => Promise<void>
}

/** RelayKeep: `TaskStore.submit`, then the watching worker (`runWatch`) with a no-op provider. */
export const relaykeep = async (run: number, probe: pg.Client, hooks: PhaseHooks = {}): Promise<Phases> => {
  const schema = freshSchema("relaykeep")
  const runtime = ManagedRuntime.make(
    Layer.mergeAll(
      pgTaskStoreLayer({ url: Redacted.make(benchPgUrl), schema, maxConnections: Concurrency }),
      providerRegistryLayer([{ name: "noop", run: () => Effect.succeed({ result: null }) }]),
      Shutdown.layerManual,
      workerOutputLayer("text", () => Effect.void)
    ).pipe(Layer.provideMerge(Host.layer), Layer.provide(nodeContextLayer))
  )
  try {
    const store = await runtime.runPromise(TaskStore)
    // Connect and create the schema before the clock starts, as the peers do.
    await runtime.runPromise(store.check)

    await hooks.beforeEnqueue?.()
    const enqueueStart = now()
    await inFlight(Jobs, Concurrency, (n) =>
      runtime.runPromise(
        store.submit({
          clientRequestId: ClientRequestId.make(`bench-${run}-${n}`),
          payload: payloadOf(run, n)
        })
      )
    )
    const enqueueMillis = now() - enqueueStart
    await hooks.afterEnqueue?.()

    await hooks.beforeProcess?.()
    const processStart = now()
    const worker = runtime.runFork(
      runWatch({
        workerId: "bench",
        leaseMillis: 60_000,
        retry: DefaultRetryPolicy,
        concurrency: Concurrency,
        maxPerProvider: new Map(),
        pollMillis: DefaultPollMillis,
        graceMillis: DefaultGraceMillis,
        cancelPollMillis: DefaultCancelPollMillis,
        heartbeatMillis: DefaultHeartbeatMillis
      })
    )
    await untilFinished(
      probe,
      `SELECT count(*) AS finished FROM "${schema}".tasks WHERE state = 'complete'`,
      []
    )
    const processMillis = now() - processStart
    await hooks.afterProcess?.()

    await runtime.runPromise(Effect.flatMap(Shutdown, (shutdown) => shutdown.signal("SIGTERM")))
    const summary = await runtime.runPromise(Fiber.join(worker))
    if (summary.finished !== Jobs) throw new Error(`relaykeep finished ${summary.finished} of ${Jobs}`)
    return { enqueue: rate(enqueueMillis), process: rate(processMillis) }
  } finally {
    await runtime.dispose()
    await dropSchema(schema)
  }
}

/**
 * pg-boss: `send`, then `Concurrency` loops of `fetch`, handler, `complete`.
 *
 * Not `work`: pg-boss 10's worker sleeps its polling interval (at least 0.5 s, 2 s by default)
 * after every fetch, even while jobs wait, so `Concurrency` workers of one job each drain at
 * most 20 jobs a second. The loops run what `work` runs for each job (the same fetch, with
 * SKIP LOCKED, and the same complete), and fetch again at once: pg-boss at its fastest with
 * `Concurrency` jobs at once, the strongest baseline it offers.
 */
export const pgboss = async (run: number, probe: pg.Client, hooks: PhaseHooks = {}): Promise<Phases> => {
  const schema = freshSchema("pgboss")
  const queue = "bench"
  const boss = new PgBoss({ connectionString: benchPgUrl, schema, max: Concurrency })
  const errors: Array<string> = []
  boss.on("error", (error) => errors.push(error.message))
  try {
    await boss.start()
    await boss.createQueue(queue)

    await hooks.beforeEnqueue?.()
    const enqueueStart = now()
    await inFlight(Jobs, Concurrency, (n) => boss.send(queue, payloadOf(run, n)))
    const enqueueMillis = now() - enqueueStart
    await hooks.afterEnqueue?.()

    let handled = 0
    const handler = async (_job: PgBoss.Job<unknown>) => {
      handled += 1
    }
    await hooks.beforeProcess?.()
    const processStart = now()
    const worker = async () => {
      for (;;) {
        const [job] = await boss.fetch<unknown>(queue, { batchSize: 1 })
        if (job === undefined) return
        await handler(job)
        await boss.complete(queue, job.id)
      }
    }
    await Promise.all(Array.from({ length: Concurrency }, worker))
    await untilFinished(
      probe,
      `SELECT count(*) AS finished FROM "${schema}".job WHERE name = $1 AND state = 'completed'`,
      [queue]
    )
    const processMillis = now() - processStart
    await hooks.afterProcess?.()

    if (handled !== Jobs || errors.length > 0)
      throw new Error(`pg-boss handled ${handled} of ${Jobs}: ${errors.join("; ")}`)
    return { enqueue: rate(enqueueMillis), process: rate(processMillis) }
  } finally {
    await boss.stop({ graceful: true, wait: true, close: true })
    await dropSchema(schema)
  }
}

const quiet = new GraphileLogger(() => () => {})

/** graphile-worker: `addJob` on a shared pool, then `run` with `concurrency`, and its LISTEN. */
export const graphile = async (run: number, probe: pg.Client, hooks: PhaseHooks = {}): Promise<Phases> => {
  const schema = freshSchema("graphile")
  // graphile-worker holds one pool connection for LISTEN; one more keeps `Concurrency` for jobs.
  const pool = new pg.Pool({ connectionString: benchPgUrl, max: Concurrency + 1 })
  // As graphile-worker asks of a pool it is given: a connection that breaks (idle, or while
  // checked out) must not crash the process; the query that used it fails the run instead.
  pool.on("error", () => undefined)
  pool.on("connect", (client) => client.on("error", () => undefined))
  try {
    await runMigrations({ pgPool: pool, schema, logger: quiet })
    const utils = await makeWorkerUtils({ pgPool: pool, schema, logger: quiet })
    try {
      await hooks.beforeEnqueue?.()
      const enqueueStart = now()
      await inFlight(Jobs, Concurrency, (n) => utils.addJob("noop", payloadOf(run, n)))
      const enqueueMillis = now() - enqueueStart
      await hooks.afterEnqueue?.()

      let handled = 0
      await hooks.beforeProcess?.()
      const processStart = now()
      const runner = await runGraphile({
        pgPool: pool,
        schema,
        logger: quiet,
        concurrency: Concurrency,
        noHandleSignals: true,
        taskList: {
          noop: async () => {
            handled += 1
          }
        }
      })
      let processMillis = Number.NaN
      try {
        // A finished job is deleted.
        await untilFinished(probe, `SELECT $1::int - count(*) AS finished FROM "${schema}"._private_jobs`, [
          Jobs
        ])
        processMillis = now() - processStart
        await hooks.afterProcess?.()
      } finally {
        await runner.stop()
      }
      if (handled !== Jobs) throw new Error(`graphile-worker handled ${handled} of ${Jobs}`)
      return { enqueue: rate(enqueueMillis), process: rate(processMillis) }
    } finally {
      await utils.release()
    }
  } finally {
    await pool.end()
    await dropSchema(schema)
  }
}

const systems = { relaykeep, pgboss, graphile } as const
type System = keyof typeof systems
const order: ReadonlyArray<System> = ["relaykeep", "pgboss", "graphile"]

export const pgThroughput: Benchmark = {
  name: "pg-throughput",
  title: `${Jobs} jobs enqueued one at a time (${Concurrency} in flight), then processed by a no-op handler with concurrency ${Concurrency}, in jobs per second: RelayKeep's PostgreSQL store, pg-boss 10 and graphile-worker 0.17 on the same database.`,
  baseline: "pg-boss (`send`, `work`) and graphile-worker (`addJob`, `run`), each in a fresh schema",
  unit: "jobs per second",
  target: {
    kind: "at-least-best",
    pairs: [
      { subject: "relaykeep.enqueue", baselines: ["pgboss.enqueue", "graphile.enqueue"] },
      { subject: "relaykeep.process", baselines: ["pgboss.process", "graphile.process"] }
    ],
    min: 1
  },
  setup: async () => {
    const probe = new pg.Client({ connectionString: benchPgUrl })
    await probe.connect()
    return {
      run: async (index) => {
        const figures: Record<string, number> = {}
        // Each run starts with another system, so that none always meets a fresher machine.
        const start = ((index % order.length) + order.length) % order.length
        for (const system of [...order.slice(start), ...order.slice(0, start)]) {
          const phases = await systems[system](index, probe)
          figures[`${system}.enqueue`] = phases.enqueue
          figures[`${system}.process`] = phases.process
        }
        const result: Figures = figures
        return result
      },
      details: () => ({
        jobs_per_phase: Jobs,
        concurrency: Concurrency,
        connections_per_pool: Concurrency,
        relaykeep: `TaskStore.submit; runWatch with concurrency ${Concurrency}, pool ${Concurrency} (--pg-pool), a provider that returns at once`,
        pgboss: `send; ${Concurrency} loops of fetch (batchSize 1), handler, complete (what work() runs per job, without its polling sleep), pool max ${Concurrency}`,
        graphile: `addJob (makeWorkerUtils on the shared pool); run with concurrency ${Concurrency}, pool ${Concurrency + 1} (one held by its LISTEN)`,
        done_when: `the database counts ${Jobs} jobs finished, asked every ${DonePollMillis} ms`
      }),
      close: () => probe.end()
    }
  }
}
