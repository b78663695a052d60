/**
 * Issue 6, point 6: the claim race on PostgreSQL, with workers as separate processes. Six
 * `relaykeep worker --watch` processes on one queue race for 300 tasks: half are queued before
 * they start (every worker scans the same backlog oldest first, so they collide on the same
 * rows), half are submitted once all of them watch (each NOTIFY wakes all six at once).
 *
 * Every claim is seen three times over: in the claiming worker's JSON events, in the record's
 * attempt history, and for the tasks run by the scripted fake CLI in the side effects that the
 * provider itself appended. Each must show every task run exactly once.
 */
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { EchoProviderName } from "../../src/domain/provider.js"
import type { JsonObject, Receipt } from "../../src/domain/Task.js"
import { WatchSummary } from "../../src/worker/watch.js"
import { CheckOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { fakeClaude } from "../support/fakeCli.js"
import { dropSchema, freshSchema, pgAvailable } from "../support/pg.js"
import type { PgQueue, SideEffect, WorkerProcess } from "./support.js"
import {
  claimedOnceEach,
  hasStarted,
  killAllWorkers,
  killFakeIfRunning,
  openPgQueue,
  pathWithNode,
  pgStoreArgs,
  readPgRecords,
  readSideEffects,
  report,
  startWorker,
  stateCounts,
  stopWorker,
  useChaosDirs,
  waitFor,
  waitForAsync
} from "./support.js"

const Workers = 6
const Tasks = 300
/** Every third task has no provider: the built-in echo answers at once, the tightest race. */
const EchoEvery = 3

const tempDir = useChaosDirs()
const decodeSummary = Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })
const ResultText = Schema.parseJson(Schema.Struct({ task_id: Schema.String, attempt: Schema.Int }))
const decodeResult = Schema.decodeUnknownSync(
  Schema.Struct({ provider: Schema.Literal("claude"), text: ResultText })
)

const schema = freshSchema()

let effectsFile: string | undefined
let queue: PgQueue | undefined
afterEach(async () => {
  await killAllWorkers()
  if (effectsFile !== undefined)
    for (const effect of readSideEffects(effectsFile)) killFakeIfRunning(effect.pid)
  effectsFile = undefined
  await queue?.close()
  queue = undefined
})

/** Task `i`'s payload: the echo, or the scripted fake CLI with a short sleep of its own. */
const payloadOf = (i: number): JsonObject =>
  i % EchoEvery === 0
    ? { n: i }
    : { provider: "claude", model: "sonnet", prompt: JSON.stringify({ sleep_ms: (i * 37) % 120 }) }

describe.skipIf(!pgAvailable)("PostgreSQL: claim race", { timeout: 300_000 }, () => {
  afterAll(() => dropSchema(schema))

  it(`${Workers} watching worker processes on ${Tasks} tasks run each task exactly once`, async () => {
    const began = Date.now()
    const dir = tempDir()
    const logs = path.join(dir, "logs")
    const workDir = path.join(dir, "work")
    // An empty data root: the workers read their provider settings there, never from $HOME.
    const root = path.join(dir, "root")
    for (const made of [logs, workDir, root]) fs.mkdirSync(made)
    const effects = path.join(dir, "effects.jsonl")
    effectsFile = effects

    const opened = await openPgQueue(schema)
    queue = opened
    const receipts: Array<Receipt> = []
    const submitUpTo = async (count: number) => {
      while (receipts.length < count)
        receipts.push(await opened.submit(`race-${receipts.length}`, payloadOf(receipts.length)))
    }
    await submitUpTo(Tasks / 2)

    const args = [
      ...pgStoreArgs(schema),
      ...["--root", root, "--pg-pool", "3", "--concurrency", "4", "--poll", "1s", "--grace", "10s"],
      ...["--log-format", "json", "--claude-executable", fakeClaude, "--work-dir", workDir]
    ]
    const env = {
      PATH: pathWithNode,
      FAKE_SCENARIO: "scripted",
      FAKE_EFFECTS: effects,
      FAKE_LIFETIME_MS: "60000"
    }
    const workers: ReadonlyArray<WorkerProcess> = Array.from({ length: Workers }, () =>
      startWorker(logs, args, env)
    )
    // The second half arrives while all of them watch: each submission wakes every worker.
    const watching = await waitFor(() => workers.every(hasStarted), 120_000)
    await submitUpTo(Tasks)
    const submitted = Date.now()

    // Bounded: the queue drains, or the assertions below say what was left.
    const drained = await waitForAsync(async () => (await opened.live()) === 0, 180_000, 500)
    const drainedAt = Date.now()
    const exits = await Promise.all(workers.map((worker) => stopWorker(worker, 60_000)))
    const records = await readPgRecords(schema)
    assert.isTrue(watching, "every worker watches")
    assert.isTrue(drained, `the queue drained: ${JSON.stringify(stateCounts(records))}`)

    const expected = receipts.map((receipt) => receipt.task_id).sort()
    assert.strictEqual(new Set(expected).size, Tasks)

    // The claims, as the workers reported them: each task exactly once, attempt 1.
    const claims = claimedOnceEach(workers, expected)
    const perWorker = workers.map((worker) => claims.filter((claim) => claim.pid === worker.pid).length)
    assert.isAtLeast(
      perWorker.filter((count) => count > 0).length,
      2,
      `more than one worker took part: ${JSON.stringify(perWorker)}`
    )

    // The rows agree: one attempt each, complete, by the worker that reported claiming it.
    const claimer = new Map(claims.map((claim) => [claim.task_id, claim.pid] as const))
    const index = new Map(receipts.map((receipt, i) => [receipt.task_id, i] as const))
    assert.deepStrictEqual([...records.map((record) => record.task_id)].sort(), expected)
    /** How the worker with `pid` ended and what it said last: what names a lost task's cause. */
    const endOf = (pid: number | undefined) => {
      const i = workers.findIndex((worker) => worker.pid === pid)
      const worker = workers[i]
      if (worker === undefined) return "(not one of ours)"
      const words = fs.readFileSync(worker.stderrFile, "utf8").split("\n").slice(-12).join("\n")
      return `its worker exited ${JSON.stringify(exits[i])}, its last words:\n${words}`
    }
    for (const record of records) {
      const id = record.task_id
      assert.strictEqual(
        record.state,
        "complete",
        `${id}: ${JSON.stringify({ error: record.error, attempts: record.attempts })}\n` +
          endOf(record.attempts[0]?.pid)
      )
      assert.strictEqual(record.attempt, 1, id)
      assert.strictEqual(record.attempts.length, 1, id)
      assert.strictEqual(record.attempts[0]?.outcome, "complete", id)
      assert.strictEqual(record.attempts[0]?.pid, claimer.get(id), id)
      assert.isNull(record.lease, id)
      const i = index.get(id) ?? -1
      if (i % EchoEvery === 0)
        assert.deepStrictEqual(record.result, { echo: record.payload, provider: EchoProviderName }, id)
      else assert.deepStrictEqual(decodeResult(record.result).text, { task_id: id, attempt: 1 }, id)
    }

    // The provider's own account: each scripted task started once and ran to its end once, as
    // attempt 1, and nothing else ran.
    const sideEffects = readSideEffects(effects)
    const scripted = expected.filter((id) => (index.get(id) ?? 0) % EchoEvery !== 0)
    const countOf = (event: SideEffect["event"]) => {
      const counts = new Map<string, number>()
      for (const effect of sideEffects)
        if (effect.event === event) {
          const key = `${effect.task_id}#${effect.attempt}`
          counts.set(key, (counts.get(key) ?? 0) + 1)
        }
      return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    }
    const once = scripted.map((id): [string, number] => [`${id}#1`, 1])
    assert.deepStrictEqual(countOf("start"), once, "each scripted task's provider started once")
    assert.deepStrictEqual(countOf("done"), once, "each scripted task's provider ran to its end once")

    // Each worker stopped cleanly and counts what its events say it claimed; nothing was lost.
    for (const [i, worker] of workers.entries()) {
      assert.deepStrictEqual(
        exits[i],
        { code: 0, signal: null },
        // What it said on the way out (a storage_error event names the failure).
        `worker ${worker.pid} exit: ${fs.readFileSync(worker.stderrFile, "utf8").split("\n").slice(-6).join("\n")}`
      )
      assert.deepStrictEqual(
        decodeSummary(fs.readFileSync(worker.stdoutFile, "utf8")),
        {
          reason: "SIGTERM",
          finished: perWorker[i] ?? -1,
          failed: 0,
          retried: 0,
          cancelled: 0,
          released: 0,
          reaped: 0
        },
        `summary of worker ${worker.pid}`
      )
    }

    const check = jsonOutput(CheckOutput, await relaykeep(["check", ...pgStoreArgs(schema)]))
    assert.isTrue(check.ok)
    assert.deepStrictEqual(check.invalid_records, [])
    assert.strictEqual(check.records, Tasks)
    assert.strictEqual(check.states.complete, Tasks)

    report("pg.claimRace", {
      schema,
      submit_ms: submitted - began,
      drain_ms: drainedAt - submitted,
      total_ms: Date.now() - began,
      claims_per_worker: perWorker
    })
  })
})
