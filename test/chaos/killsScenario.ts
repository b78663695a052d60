/**
 * The SIGKILL scenario, for any store (kills.test.ts: the file store; pg.kills.test.ts:
 * PostgreSQL). Watching worker processes are SIGKILLed at random moments while they run tasks
 * through a fake provider that records each side effect, and replaced each time. At the end:
 * every task complete with the result of its last attempt, no attempt run twice, no record
 * damaged, nothing running after one `relaykeep recover`, and only SIGKILLed workers declared
 * lost.
 *
 * A killed worker's provider child has its own process group: it may still run, and append its
 * "done" side effect, until a reaper stops it or it ends. That is at-least-once delivery, as
 * designed; what must never happen is that such a run becomes the task's result, or that an
 * attempt runs twice, or that a task is lost.
 */
import { afterEach, assert } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { JsonObject, Receipt, TaskRecord } from "../../src/domain/Task.js"
import { ReapReport } from "../../src/worker/reap.js"
import { WatchSummary } from "../../src/worker/watch.js"
import { CheckOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { fakeClaude } from "../support/fakeCli.js"
import type { SideEffect, WorkerProcess } from "./support.js"
import {
  delay,
  fakeRunning,
  hasStarted,
  inFlight,
  killAllWorkers,
  killFakeIfRunning,
  pathWithNode,
  readSideEffects,
  report,
  seededRandom,
  startWorker,
  stateCounts,
  stopWorker,
  useChaosDirs,
  waitFor,
  waitForAsync,
  withTimeout
} from "./support.js"

/** The queue under test, opened on a data root by the test file. */
export interface KillsQueue {
  /** The flags that point a command at it (and at the data root). */
  readonly storeArgs: ReadonlyArray<string>
  /** Submit in-process through the real store. */
  readonly submit: (id: string, payload: JsonObject) => Promise<Receipt>
  /** Tasks queued or running, read without the store under test where possible. */
  readonly live: () => Promise<number>
  /** Every record, read straight from storage. */
  readonly records: () => Promise<ReadonlyArray<TaskRecord>>
  readonly close: () => Promise<void>
}

export interface KillsSettings {
  /** Names the run in the chaos report. */
  readonly name: string
  /** Said in every failure, with the seed. */
  readonly context: string
  readonly tasks: number
  readonly workers: number
  readonly minKills: number
  /** Live tasks (queued or running) the feeder keeps while the workers run. */
  readonly queueDepth: number
  readonly lease: string
  /** How far the kills may run ahead of the submissions. */
  readonly killSlack: number
  /** Bounds, not expectations: submitting and killing, then draining what is left. */
  readonly killPhaseMillis: number
  readonly drainMillis: number
}

/** Every tenth task fails its first attempt on its own (exit 3, retryable), kills or not. */
const FailFirstEvery = 10

const tempDir = useChaosDirs()
const decodeSummary = Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })
const decodeReap = Schema.decodeUnknownSync(Schema.parseJson(ReapReport), { onExcessProperty: "error" })
const ResultText = Schema.parseJson(Schema.Struct({ task_id: Schema.String, attempt: Schema.Int }))
const decodeResult = Schema.decodeUnknownEither(
  Schema.Struct({ provider: Schema.Literal("claude"), text: ResultText })
)
const decodePlan = Schema.decodeUnknownSync(
  Schema.Struct({
    prompt: Schema.parseJson(Schema.Struct({ sleep_ms: Schema.Int, fail_attempts: Schema.Int }))
  })
)

/**
 * Everything left behind, however the test ended: workers by pid, fake providers by the pids
 * they recorded, and the queue opened in this process.
 */
let effectsFile: string | undefined
let openedQueue: KillsQueue | undefined
afterEach(async () => {
  await killAllWorkers()
  if (effectsFile !== undefined)
    for (const effect of readSideEffects(effectsFile)) killFakeIfRunning(effect.pid)
  effectsFile = undefined
  await openedQueue?.close()
  openedQueue = undefined
})

const attemptKey = (taskId: string, attempt: number) => `${taskId}#${attempt}`

/** Group `items` by a description, keeping a count and a few examples: readable failures. */
const tally = <A>(items: ReadonlyArray<A>, label: (item: A) => string, example: (item: A) => string) => {
  const groups = new Map<string, { count: number; examples: Array<string> }>()
  for (const item of items) {
    const group = groups.get(label(item)) ?? { count: 0, examples: [] }
    group.count += 1
    if (group.examples.length < 3) group.examples.push(example(item))
    groups.set(label(item), group)
  }
  return Object.fromEntries(groups)
}

/** Run the scenario once; `open` opens the queue under test on a fresh data root. */
export const runKills = async (
  settings: KillsSettings,
  open: (root: string) => Promise<KillsQueue>
): Promise<void> => {
  const { tasks, minKills } = settings
  const began = Date.now()
  const seed = began % 2 ** 31
  const random = seededRandom(seed)
  const between = (low: number, high: number) => low + Math.floor(random() * (high - low + 1))
  const context = `seed ${seed}, ${settings.context}`

  const dir = tempDir()
  const logs = path.join(dir, "logs")
  const workDir = path.join(dir, "work")
  // An empty data root: the workers read their provider settings there, never from $HOME.
  const root = path.join(dir, "root")
  for (const made of [logs, workDir, root]) fs.mkdirSync(made)
  const effects = path.join(dir, "effects.jsonl")
  effectsFile = effects

  // Submission is not under test: in-process, through the real store, keeping about
  // `queueDepth` tasks live so that the kills fall across all of them (and every look of a
  // worker, which reads each live record, stays cheap).
  const plans = Array.from({ length: tasks }, (_, i) => ({
    sleep_ms: between(20, 300),
    fail_attempts: i % FailFirstEvery === 0 ? 1 : 0
  }))
  const opened = await open(root)
  openedQueue = opened
  const receipts: Array<Receipt> = []
  const submitNext = async () => {
    const i = receipts.length
    const payload = { provider: "claude", model: "sonnet", prompt: JSON.stringify(plans[i]) }
    receipts.push(await opened.submit(`chaos-${i}`, payload))
  }
  const deadline = began + settings.killPhaseMillis
  let stopFeeding = false
  const feed = async () => {
    while (receipts.length < tasks && Date.now() < deadline && !stopFeeding) {
      if ((await opened.live()) < settings.queueDepth) await submitNext()
      else await delay(50)
    }
  }
  while (receipts.length < settings.queueDepth) await submitNext()

  const args = [
    ...opened.storeArgs,
    ...["--concurrency", "2", "--max-attempts", "100", "--lease", settings.lease],
    ...["--poll", "1s", "--retry-backoff", "50ms", "--retry-backoff-max", "200ms"],
    ...["--grace", "10s", "--kill-grace", "1s", "--log-format", "json"],
    ...["--claude-executable", fakeClaude, "--work-dir", workDir]
  ]
  const env = {
    PATH: pathWithNode,
    FAKE_SCENARIO: "scripted",
    FAKE_EFFECTS: effects,
    FAKE_LIFETIME_MS: "60000"
  }
  const workers: Array<WorkerProcess> = Array.from({ length: settings.workers }, () =>
    startWorker(logs, args, env)
  )

  // Kill a random worker at random moments and start a replacement each time, keeping pace
  // with the submissions so that the kills fall across all the tasks.
  const killed = new Set<number>()
  let kills = 0
  let killsInFlight = 0
  const killLoop = async () => {
    while ((kills < minKills || receipts.length < tasks) && Date.now() < deadline) {
      await delay(between(100, 1_000))
      if (kills >= Math.ceil((minKills * receipts.length) / tasks) + settings.killSlack) continue
      // Mostly a worker with an attempt in flight (if none has one now, try again later);
      // sometimes any worker, wherever it is: starting, idle, looking, writing.
      const busy = workers.filter((worker) => inFlight(worker) > 0)
      const pool = random() < 0.85 ? busy : workers
      const victim = pool[between(0, pool.length - 1)]
      if (victim === undefined) continue
      if (inFlight(victim) > 0) killsInFlight += 1
      process.kill(victim.pid, "SIGKILL")
      kills += 1
      killed.add(victim.pid)
      workers[workers.indexOf(victim)] = startWorker(logs, args, env)
      const exit = await withTimeout(victim.exited, 30_000)
      assert.deepStrictEqual(exit, { code: null, signal: "SIGKILL" }, `worker ${victim.pid} died of the kill`)
    }
  }
  let feederFailure: unknown = undefined
  try {
    await Promise.all([
      feed().catch((error: unknown) => {
        feederFailure = error
      }),
      killLoop()
    ])
  } finally {
    stopFeeding = true
  }
  const killsDone = Date.now()
  const liveWhenKillsStopped = await opened.live()
  assert.isUndefined(feederFailure, "every submission succeeded")
  assert.strictEqual(receipts.length, tasks, `all tasks submitted within the time bound (${context})`)
  assert.isAtLeast(kills, minKills, `SIGKILLs done within the time bound (${context})`)

  // The survivors drain the queue (bounded), then stop on SIGTERM; then one reap.
  const drained = await waitForAsync(async () => (await opened.live()) === 0, settings.drainMillis, 500)
  const drainedAt = Date.now()
  // A replacement started late may still be loading: a SIGTERM before it watches would end
  // it as any node process, so wait (bounded) until each one watches.
  const watching = await waitFor(() => workers.every(hasStarted), 120_000)
  const exits = await Promise.all(workers.map((worker) => stopWorker(worker, 60_000)))
  const recovered = await relaykeep(["recover", ...opened.storeArgs])
  const check = await relaykeep(["check", ...opened.storeArgs])
  // Providers orphaned by the kills end by themselves within their sleep (or a reaper
  // stopped them); wait (bounded) so that every side effect they will ever write is in.
  const settled = await waitFor(
    () => readSideEffects(effects).every((effect) => !fakeRunning(effect.pid)),
    30_000
  )
  const records = await opened.records()
  const sideEffects = readSideEffects(effects)

  const starts = new Map<string, Array<SideEffect>>()
  const dones = new Map<string, Array<SideEffect>>()
  for (const effect of sideEffects) {
    const into = effect.event === "start" ? starts : dones
    const key = attemptKey(effect.task_id, effect.attempt)
    into.set(key, [...(into.get(key) ?? []), effect])
  }
  const attempts = records.flatMap((record) => record.attempts.map((attempt) => ({ record, attempt })))
  const lost = attempts.filter(({ attempt }) => attempt.error?.tag === "worker_lost")
  const expired = lost.filter(({ attempt }) => attempt.error?.message.endsWith("its lease expired") === true)
  const notComplete = records.filter((record) => record.state !== "complete")
  report(settings.name, {
    seed,
    kills,
    kills_in_flight: killsInFlight,
    states: stateCounts(records),
    attempts: attempts.length,
    lost_attempts: lost.length,
    lost_after_provider_start: lost.filter(({ record, attempt }) =>
      starts.has(attemptKey(record.task_id, attempt.attempt))
    ).length,
    lost_by_lease_expiry: expired.length,
    late_outcomes: attempts.filter(({ attempt }) => attempt.late !== undefined).length,
    live_when_kills_stopped: liveWhenKillsStopped,
    side_effects: sideEffects.length,
    kill_phase_ms: killsDone - began,
    drain_ms: drainedAt - killsDone,
    total_ms: Date.now() - began
  })

  assert.isTrue(drained, `the queue drained (${context}): ${JSON.stringify(stateCounts(records))}`)
  assert.isAtLeast(
    killsInFlight,
    minKills / 2,
    `most kills hit a worker with an attempt in flight (${context})`
  )
  assert.isTrue(watching, "every worker watches before its SIGTERM")
  for (const [i, worker] of workers.entries()) {
    assert.deepStrictEqual(exits[i], { code: 0, signal: null }, `worker ${worker.pid} stops on SIGTERM`)
    const summary = decodeSummary(fs.readFileSync(worker.stdoutFile, "utf8"))
    assert.strictEqual(summary.reason, "SIGTERM")
    assert.strictEqual(summary.released, 0, "a drained queue leaves nothing to give back")
  }

  // One reap ran; nothing is running, and no record is damaged.
  assert.strictEqual(recovered.code, 0, `recover: ${recovered.stderr}`)
  assert.deepStrictEqual(decodeReap(recovered.stdout).invalid_records, [])
  assert.deepStrictEqual(
    records.filter((record) => record.state === "running").map((record) => record.task_id),
    [],
    "nothing is running after one reap"
  )
  const checked = jsonOutput(CheckOutput, check)
  assert.deepStrictEqual(checked.invalid_records, [], "no damaged record")
  assert.isTrue(checked.ok)
  assert.strictEqual(checked.records, tasks)

  // Every task is terminal, and complete: 100 attempts outlast any run of kills here.
  assert.deepStrictEqual(
    [...records.map((record) => record.task_id)].sort(),
    receipts.map((receipt) => receipt.task_id).sort(),
    "every submitted task has its record"
  )
  assert.deepStrictEqual(
    tally(
      notComplete,
      (record) => `${record.state}: ${record.error?.tag}: ${record.error?.message.replace(/\d+/g, "N")}`,
      (record) => `${record.task_id} attempt ${record.attempt}`
    ),
    {},
    `every task complete (${context}; ${notComplete.length} not)`
  )

  // Side effects: no attempt ran twice, and none ran outside the history.
  assert.isTrue(settled, "every fake provider ended")
  assert.deepStrictEqual(
    [...starts].filter(([, list]) => list.length > 1),
    [],
    "no attempt ran its provider twice"
  )
  const byTask = new Map<string, TaskRecord>(records.map((record) => [record.task_id, record]))
  assert.deepStrictEqual(
    sideEffects
      .filter(
        (effect) =>
          byTask.get(effect.task_id)?.attempts.some((attempt) => attempt.attempt === effect.attempt) !== true
      )
      .map((effect) => attemptKey(effect.task_id, effect.attempt)),
    [],
    "every provider run belongs to an attempt in its task's history"
  )

  // A worker is declared dead only if it was: one of those SIGKILLed here. (A live but
  // starved worker may lose its lease by expiry; the fence then keeps its outcome as late.)
  assert.deepStrictEqual(
    lost
      .filter(({ attempt }) => !killed.has(attempt.pid))
      .filter((entry) => !expired.includes(entry))
      .map(({ record, attempt }) => `${attemptKey(record.task_id, attempt.attempt)} pid ${attempt.pid}`),
    [],
    "every attempt lost to a dead owner was a SIGKILLed worker's"
  )

  for (const record of records) {
    const id = record.task_id
    // The history is attempts 1..n, each ended; the last one complete and the result's.
    assert.deepStrictEqual(
      record.attempts.map((attempt) => attempt.attempt),
      Array.from({ length: record.attempt }, (_, i) => i + 1),
      `attempt numbers of ${id}`
    )
    assert.isNull(record.lease, `lease of ${id}`)
    assert.strictEqual(
      record.attempts[record.attempts.length - 1]?.outcome,
      "complete",
      `last attempt of ${id}`
    )
    const result = decodeResult(record.result)
    assert.deepStrictEqual(
      result._tag === "Right" ? result.right.text : result.left.message,
      { task_id: id, attempt: record.attempt },
      `the result of ${id} is its last attempt's`
    )
    const plan = decodePlan(record.payload).prompt
    const finalKey = attemptKey(id, record.attempt)
    assert.strictEqual(starts.get(finalKey)?.length, 1, `the last attempt of ${id} started its provider once`)
    assert.strictEqual(dones.get(finalKey)?.length, 1, `the last attempt of ${id} ran to its end once`)
    if (plan.fail_attempts > 0) assert.isAtLeast(record.attempt, 2, `${id} fails its first attempt`)

    for (const attempt of record.attempts) {
      const key = attemptKey(id, attempt.attempt)
      assert.notStrictEqual(attempt.outcome, "running", `${key} ended`)
      assert.isNotNull(attempt.ended_at, `${key} ended_at`)
      if (attempt.error?.tag === "worker_lost") continue
      // Any attempt that was not lost got as far as its provider, which ran to its end; one
      // that failed failed by its script (exit 3 on an attempt up to fail_attempts).
      assert.isTrue(starts.has(key) && dones.has(key), `${key} (${attempt.outcome}) has its side effects`)
      if (attempt.outcome === "failed") {
        assert.isAtMost(attempt.attempt, plan.fail_attempts, `${key} failed: ${attempt.error?.message}`)
        assert.strictEqual(attempt.error?.message, "claude: exited with code 3 without a result", key)
      }
    }
  }
}
