/**
 * Issue 6, point 7: workers in separate processes on one PostgreSQL queue, as if on separate
 * machines. Each process names its machine through RELAYKEEP_HOST (alpha, beta) and its
 * worker through --worker-id, and leases and attempt records carry both.
 *
 * A reaper can ask its own process table whether a lease's worker still runs only for leases of
 * its own machine; another machine's lease it can reap only once it expired. So: tasks are
 * dispatched once across machines (neither reaps the other's live work), a machine reaps its
 * own dead worker's tasks at once, and the orphans of a machine that died are reaped by
 * another when their leases expire, and then run there.
 */
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Receipt, TaskRecord } from "../../src/domain/Task.js"
import { timeMillis } from "../../src/domain/Task.js"
import { ReapReport } from "../../src/worker/reap.js"
import { WatchSummary } from "../../src/worker/watch.js"
import type { PgQueue, WorkerProcess } from "../chaos/support.js"
import {
  hasStarted,
  killAllWorkers,
  killFakeIfRunning,
  openPgQueue,
  pathWithNode,
  pgStoreArgs,
  readPgRecords,
  readSideEffects,
  startWorker,
  stateCounts,
  stopWorker,
  useChaosDirs,
  waitFor,
  waitForAsync,
  workerEvents
} from "../chaos/support.js"
import { CheckOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { fakeClaude, FakeRun } from "../support/fakeCli.js"
import { dropSchema, freshSchema, pgAvailable } from "../support/pg.js"

const tempDir = useChaosDirs()
const decodeSummary = Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })
const decodeReap = Schema.decodeUnknownSync(Schema.parseJson(ReapReport), { onExcessProperty: "error" })
const decodeRun = Schema.decodeUnknownSync(Schema.parseJson(FakeRun))
const ResultText = Schema.parseJson(Schema.Struct({ task_id: Schema.String, attempt: Schema.Int }))
const decodeResult = Schema.decodeUnknownSync(
  Schema.Struct({ provider: Schema.Literal("claude"), text: ResultText })
)

/** The worker events this file reads with their time, which the chaos support leaves out. */
const TimedStarted = Schema.Struct({ time: Schema.String, event: Schema.Literal("started") })
const TimedReaped = Schema.Struct({
  time: Schema.String,
  event: Schema.Literal("reaped"),
  task_id: Schema.String,
  attempt: Schema.Int,
  reason: Schema.String,
  state: Schema.String
})
const isTimedStarted = Schema.is(TimedStarted)
const isTimedReaped = Schema.is(TimedReaped)

const schemas: Array<string> = []
const newSchema = () => {
  const schema = freshSchema()
  schemas.push(schema)
  return schema
}

/** Fake providers to stop after each test: the pids they recorded in these files. */
const runFiles: Array<string> = []
const effectFiles: Array<string> = []
let queue: PgQueue | undefined
afterEach(async () => {
  await killAllWorkers()
  for (const file of runFiles.splice(0)) for (const run of runsIn(file)) killFakeIfRunning(run.pid)
  for (const file of effectFiles.splice(0))
    for (const effect of readSideEffects(file)) killFakeIfRunning(effect.pid)
  await queue?.close()
  queue = undefined
})

/** The runs a fake recorded in `file` ($FAKE_RECORD), with the attempt each one served. */
const runsIn = (file: string) =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => decodeRun(line))
        .map((run) => ({
          pid: run.pid,
          task_id: run.env["RELAYKEEP_TASK_ID"] ?? "",
          attempt: Number(run.env["RELAYKEEP_ATTEMPT"] ?? "0")
        }))
    : []

interface Sandbox {
  readonly schema: string
  readonly logs: string
  readonly workDir: string
  readonly root: string
  readonly dir: string
  readonly queue: PgQueue
}

const sandbox = async (): Promise<Sandbox> => {
  const dir = tempDir()
  const logs = path.join(dir, "logs")
  const workDir = path.join(dir, "work")
  // An empty data root: the workers read their provider settings there, never from $HOME.
  const root = path.join(dir, "root")
  for (const made of [logs, workDir, root]) fs.mkdirSync(made)
  const schema = newSchema()
  queue = await openPgQueue(schema)
  return { schema, logs, workDir, root, dir, queue }
}

/** A watching worker on machine `host`, named `workerId`, running the fake claude. */
const machineWorker = (
  box: Sandbox,
  host: string,
  workerId: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>
): WorkerProcess =>
  startWorker(
    box.logs,
    [
      ...pgStoreArgs(box.schema),
      ...["--root", box.root, "--worker-id", workerId, "--pg-pool", "2", "--poll", "1s"],
      ...["--grace", "10s", "--kill-grace", "1s", "--log-format", "json"],
      ...["--claude-executable", fakeClaude, "--work-dir", box.workDir],
      ...args
    ],
    { RELAYKEEP_HOST: host, PATH: pathWithNode, FAKE_LIFETIME_MS: "60000", ...env }
  )

/** `relaykeep recover` on the sandbox's queue, run as a process of machine `host`. */
const recoverAs = async (box: Sandbox, host: string) => {
  const result = await relaykeep(["recover", ...pgStoreArgs(box.schema)], { env: { RELAYKEEP_HOST: host } })
  assert.strictEqual(result.code, 0, `recover as ${host}: ${result.stderr}`)
  return decodeReap(result.stdout)
}

const scriptedTask = (sleepMillis: number) => ({
  provider: "claude",
  model: "sonnet",
  prompt: JSON.stringify({ sleep_ms: sleepMillis })
})

const sortedIds = (receipts: ReadonlyArray<Receipt>) => receipts.map((receipt) => receipt.task_id).sort()

const recordOf = (records: ReadonlyArray<TaskRecord>, receipt: Receipt | undefined): TaskRecord => {
  const record = records.find((candidate) => candidate.task_id === receipt?.task_id)
  if (record === undefined) throw new Error(`no row for ${receipt?.task_id}`)
  return record
}

describe.skipIf(!pgAvailable)("PostgreSQL: workers on two machines", { timeout: 180_000 }, () => {
  afterAll(async () => {
    for (const schema of schemas.splice(0)) await dropSchema(schema)
  })

  it("dispatches each task once across both machines, and neither reaps the other's live work", async () => {
    const box = await sandbox()
    const effects = path.join(box.dir, "effects.jsonl")
    effectFiles.push(effects)
    const env = { FAKE_SCENARIO: "scripted", FAKE_EFFECTS: effects }
    // Leases of 3 s, and some tasks that outlast several of them: each machine sees the other's
    // running tasks, held by heartbeats it cannot verify by pid, and must leave them alone.
    const lease = ["--lease", "3s", "--concurrency", "3"]
    const alpha = machineWorker(box, "alpha", "alpha-1", lease, env)
    const beta = machineWorker(box, "beta", "beta-1", lease, env)
    const workers = [alpha, beta]
    assert.isTrue(await waitFor(() => workers.every(hasStarted), 60_000), "both machines watch")

    const Tasks = 60
    const receipts: Array<Receipt> = []
    for (let i = 0; i < Tasks; i++)
      receipts.push(
        await box.queue.submit(`machines-${i}`, scriptedTask(i % 10 === 0 ? 7_000 : (i * 53) % 400))
      )
    const drained = await waitForAsync(async () => (await box.queue.live()) === 0, 120_000, 500)
    const exits = await Promise.all(workers.map((worker) => stopWorker(worker, 60_000)))
    const records = await readPgRecords(box.schema)
    assert.isTrue(drained, `the queue drained: ${JSON.stringify(stateCounts(records))}`)

    // One attempt per task, complete, recorded with the machine and worker that ran it.
    const machineOf = new Map([
      [alpha.pid, { host: "alpha", worker_id: "alpha-1" }],
      [beta.pid, { host: "beta", worker_id: "beta-1" }]
    ])
    assert.deepStrictEqual([...records.map((record) => record.task_id)].sort(), sortedIds(receipts))
    for (const record of records) {
      const id = record.task_id
      assert.strictEqual(record.state, "complete", id)
      assert.strictEqual(record.attempts.length, 1, `${id} has one attempt`)
      const [attempt] = record.attempts
      assert.strictEqual(attempt?.outcome, "complete", id)
      assert.deepStrictEqual(
        { host: attempt?.host, worker_id: attempt?.worker_id },
        machineOf.get(attempt?.pid ?? -1),
        `${id} ran on the machine of the worker that claimed it`
      )
      assert.deepStrictEqual(decodeResult(record.result).text, { task_id: id, attempt: 1 })
    }
    const hosts = records.map((record) => record.attempts[0]?.host)
    const tally = {
      alpha: hosts.filter((host) => host === "alpha").length,
      beta: hosts.filter((host) => host === "beta").length
    }
    assert.isAbove(tally.alpha, 0, `both machines took part: ${JSON.stringify(tally)}`)
    assert.isAbove(tally.beta, 0, `both machines took part: ${JSON.stringify(tally)}`)

    // Each provider run once; no machine reaped anything; both stopped cleanly.
    const starts = readSideEffects(effects).filter((effect) => effect.event === "start")
    assert.deepStrictEqual(
      starts.map((effect) => `${effect.task_id}#${effect.attempt}`).sort(),
      sortedIds(receipts).map((id) => `${id}#1`),
      "each task's provider started once"
    )
    for (const [i, worker] of workers.entries()) {
      assert.deepStrictEqual(exits[i], { code: 0, signal: null }, `worker ${worker.pid} stops on SIGTERM`)
      assert.deepStrictEqual(workerEvents(worker).reaped, [], `worker ${worker.pid} reaped nothing`)
      const summary = decodeSummary(fs.readFileSync(worker.stdoutFile, "utf8"))
      assert.deepStrictEqual(
        { reaped: summary.reaped, failed: summary.failed, retried: summary.retried },
        { reaped: 0, failed: 0, retried: 0 }
      )
    }
    const check = jsonOutput(CheckOutput, await relaykeep(["check", ...pgStoreArgs(box.schema)]))
    assert.deepStrictEqual(check.invalid_records, [])
    assert.strictEqual(check.states.complete, Tasks)
  })

  it("a machine reaps its own dead worker's tasks at once, by pid; another machine cannot tell", async () => {
    const box = await sandbox()
    const runs = path.join(box.dir, "alpha-runs.jsonl")
    runFiles.push(runs)
    // A long lease: whatever is reaped here is reaped by pid, not by expiry.
    const alpha = machineWorker(box, "alpha", "alpha-1", ["--lease", "120s"], {
      FAKE_SCENARIO: "hang",
      FAKE_RECORD: runs
    })
    assert.isTrue(await waitFor(() => hasStarted(alpha), 60_000), "alpha watches")
    const receipt = await box.queue.submit("own-orphan", scriptedTask(0))
    assert.isTrue(await waitFor(() => runsIn(runs).length === 1, 60_000), "alpha's provider runs")
    process.kill(alpha.pid, "SIGKILL")
    await alpha.exited
    for (const run of runsIn(runs)) killFakeIfRunning(run.pid)

    const fromBeta = await recoverAs(box, "beta")
    assert.deepStrictEqual(
      { reaped: fromBeta.reaped, live: fromBeta.live },
      { reaped: [], live: [receipt.task_id] },
      "beta cannot see alpha's processes: the lease is live to it"
    )
    const fromAlpha = await recoverAs(box, "alpha")
    assert.deepStrictEqual(
      fromAlpha.reaped.map((task) => ({
        task_id: task.task_id,
        reason: task.reason,
        worker_id: task.worker_id
      })),
      [{ task_id: receipt.task_id, reason: "owner_dead", worker_id: "alpha-1" }],
      "alpha sees its worker's pid is gone"
    )
    const record = recordOf(await readPgRecords(box.schema), receipt)
    assert.strictEqual(record.state, "failed", "one attempt allowed (the default): the task ends failed")
    assert.strictEqual(record.error?.tag, "worker_lost")
    assert.strictEqual(
      record.error?.message,
      `worker alpha-1 (pid ${alpha.pid} on alpha) was lost: its process is gone`
    )
  })

  it("orphans of a killed machine are reaped by another once their leases expire, then retried or failed", async () => {
    const box = await sandbox()
    const runs = path.join(box.dir, "alpha-runs.jsonl")
    const effects = path.join(box.dir, "effects.jsonl")
    runFiles.push(runs)
    effectFiles.push(effects)
    const LeaseMillis = 12_000
    const lease = ["--lease", `${LeaseMillis / 1000}s`]
    // On alpha the provider hangs, as a slow agent would; on beta it answers at once.
    const onAlpha = { FAKE_SCENARIO: "hang", FAKE_RECORD: runs }

    // alpha-1 (two attempts per task) takes two tasks and is then full; alpha-2 (one attempt)
    // takes the third.
    const alpha1 = machineWorker(
      box,
      "alpha",
      "alpha-1",
      [...lease, "--concurrency", "2", "--max-attempts", "2"],
      onAlpha
    )
    assert.isTrue(await waitFor(() => hasStarted(alpha1), 60_000), "alpha-1 watches")
    const retried = [
      await box.queue.submit("orphan-retried-0", scriptedTask(50)),
      await box.queue.submit("orphan-retried-1", scriptedTask(50))
    ]
    assert.isTrue(await waitFor(() => runsIn(runs).length === 2, 60_000), "alpha-1 runs both")
    const alpha2 = machineWorker(
      box,
      "alpha",
      "alpha-2",
      [...lease, "--concurrency", "1", "--max-attempts", "1"],
      onAlpha
    )
    assert.isTrue(await waitFor(() => hasStarted(alpha2), 60_000), "alpha-2 watches")
    const final = await box.queue.submit("orphan-final", scriptedTask(50))
    assert.isTrue(await waitFor(() => runsIn(runs).length === 3, 60_000), "alpha-2 runs the third")

    // Machine alpha dies: its workers and their providers.
    for (const worker of [alpha1, alpha2]) process.kill(worker.pid, "SIGKILL")
    await Promise.all([alpha1.exited, alpha2.exited])
    for (const run of runsIn(runs)) killFakeIfRunning(run.pid)
    const orphaned = await readPgRecords(box.schema)
    const expiresAt = new Map<string, number>(
      orphaned.map((record) => [
        record.task_id,
        timeMillis(record.lease?.expires_at ?? "1970-01-01T00:00:00Z")
      ])
    )
    const firstExpiry = Math.min(...expiresAt.values())
    assert.deepStrictEqual(
      orphaned.map((record) => `${record.state} ${record.lease?.host} ${record.lease?.worker_id}`).sort(),
      ["running alpha alpha-1", "running alpha alpha-1", "running alpha alpha-2"]
    )

    // Beta, while alpha's leases hold, cannot tell the machine is gone: it reaps nothing.
    const early = await recoverAs(box, "beta")
    const earlyDone = Date.now()
    assert.isBelow(earlyDone, firstExpiry, "premise: beta looked before any lease expired")
    assert.deepStrictEqual(
      { reaped: early.reaped, live: [...early.live].sort() },
      { reaped: [], live: sortedIds([...retried, final]) }
    )

    // A watching beta then waits out the leases, reaps and runs what is left.
    const beta = machineWorker(
      box,
      "beta",
      "beta-1",
      [...lease, "--concurrency", "3", "--max-attempts", "3"],
      {
        FAKE_SCENARIO: "scripted",
        FAKE_EFFECTS: effects
      }
    )
    const settled = await waitForAsync(async () => (await box.queue.live()) === 0, LeaseMillis + 60_000, 250)
    const betaStarted = workerEvents(beta).all.find(isTimedStarted)
    const exit = await stopWorker(beta, 60_000)
    const records = await readPgRecords(box.schema)
    assert.isTrue(settled, `beta settled every orphan: ${JSON.stringify(stateCounts(records))}`)
    assert.isBelow(
      timeMillis(betaStarted?.time ?? "9999-01-01T00:00:00Z"),
      firstExpiry,
      "premise: beta watched while alpha's leases held"
    )

    // Beta reaped each orphan once, for its expired lease, and only after it expired.
    const reaped = workerEvents(beta).all.filter(isTimedReaped)
    assert.deepStrictEqual(
      reaped.map((event) => `${event.task_id} ${event.attempt} ${event.reason} ${event.state}`).sort(),
      [
        ...retried.map((receipt) => `${receipt.task_id} 1 lease_expired queued`),
        `${final.task_id} 1 lease_expired failed`
      ].sort()
    )
    for (const event of reaped)
      assert.isAtLeast(
        timeMillis(event.time),
        expiresAt.get(event.task_id) ?? Infinity,
        `${event.task_id} reaped after its lease expired`
      )

    const shape = (record: TaskRecord) =>
      record.attempts.map((attempt) => ({
        attempt: attempt.attempt,
        host: attempt.host,
        worker_id: attempt.worker_id,
        pid: attempt.pid,
        outcome: attempt.outcome,
        error: attempt.error
      }))
    type AttemptShape = ReturnType<typeof shape>[number]
    const lostAttempt = (worker: string, pid: number): AttemptShape => ({
      attempt: 1,
      host: "alpha",
      worker_id: worker,
      pid,
      outcome: "failed",
      error: {
        tag: "worker_lost",
        message: `worker ${worker} (pid ${pid} on alpha) was lost: its lease expired`,
        retryable: true
      }
    })
    for (const receipt of retried) {
      const record = recordOf(records, receipt)
      assert.strictEqual(record.state, "complete", receipt.task_id)
      assert.deepStrictEqual(shape(record), [
        lostAttempt("alpha-1", alpha1.pid),
        { attempt: 2, host: "beta", worker_id: "beta-1", pid: beta.pid, outcome: "complete", error: null }
      ])
      assert.isAtLeast(
        timeMillis(record.attempts[0]?.ended_at ?? "1970-01-01T00:00:00Z"),
        expiresAt.get(receipt.task_id) ?? Infinity,
        "the lost attempt ended once its lease had expired"
      )
      assert.deepStrictEqual(decodeResult(record.result).text, { task_id: receipt.task_id, attempt: 2 })
    }
    const finalRecord = recordOf(records, final)
    assert.strictEqual(finalRecord.state, "failed", "alpha-2 allowed one attempt: the orphan ends failed")
    assert.deepStrictEqual(shape(finalRecord), [lostAttempt("alpha-2", alpha2.pid)])
    assert.deepStrictEqual(finalRecord.error, lostAttempt("alpha-2", alpha2.pid).error)

    // Each provider ran once per attempt: alpha's hung first attempts, beta's second ones.
    assert.deepStrictEqual(
      runsIn(runs)
        .map((run) => `${run.task_id}#${run.attempt}`)
        .sort(),
      sortedIds([...retried, final]).map((id) => `${id}#1`)
    )
    assert.deepStrictEqual(
      readSideEffects(effects)
        .map((effect) => `${effect.event} ${effect.task_id}#${effect.attempt}`)
        .sort(),
      sortedIds(retried)
        .flatMap((id) => [`done ${id}#2`, `start ${id}#2`])
        .sort()
    )

    assert.deepStrictEqual(exit, { code: 0, signal: null }, "beta stops on SIGTERM")
    assert.deepStrictEqual(decodeSummary(fs.readFileSync(beta.stdoutFile, "utf8")), {
      reason: "SIGTERM",
      finished: 2,
      failed: 0,
      retried: 0,
      cancelled: 0,
      released: 0,
      reaped: 3
    })
    const check = jsonOutput(CheckOutput, await relaykeep(["check", ...pgStoreArgs(box.schema)]))
    assert.deepStrictEqual(check.invalid_records, [])
    assert.deepStrictEqual(
      { complete: check.states.complete, failed: check.states.failed },
      { complete: 2, failed: 1 }
    )
  })
})
