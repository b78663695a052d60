/**
 * Requirement 9: eight watching workers started at once on 1,000 queued tasks never claim an
 * attempt twice. Every claim is seen twice over: in the claiming worker's JSON events
 * ("claimed", with task and attempt) and in the record's history (the attempt's pid).
 */
import { afterEach, assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { WatchSummary } from "../../src/worker/watch.js"
import { CheckOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { seedTasks } from "../support/stores.js"
import type { WorkerProcess } from "./support.js"
import {
  claimedOnceEach,
  hasStarted,
  killAllWorkers,
  liveMarkers,
  readRecords,
  report,
  startWorker,
  stateCounts,
  stopWorker,
  useChaosDirs,
  waitFor
} from "./support.js"

const Workers = 8
const Tasks = 1_000

const tempDir = useChaosDirs()
const decodeSummary = Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })

afterEach(killAllWorkers)

describe("claim race", { timeout: 600_000 }, () => {
  it(`${Workers} watching workers on ${Tasks} queued tasks claim each attempt once`, async () => {
    const began = Date.now()
    const dir = tempDir()
    const root = path.join(dir, "root")
    const logs = path.join(dir, "logs")
    fs.mkdirSync(logs)
    const receipts = await seedTasks(
      root,
      Array.from({ length: Tasks }, (_, i) => ({ id: `race-${i}`, payload: { n: i } }))
    )
    const expected = receipts.map((receipt) => receipt.task_id).sort()
    assert.strictEqual(new Set(expected).size, Tasks)
    const seeded = Date.now()

    const args = [
      "--root",
      root,
      "--concurrency",
      "4",
      "--poll",
      "1s",
      "--grace",
      "10s",
      "--log-format",
      "json"
    ]
    const workers: ReadonlyArray<WorkerProcess> = Array.from({ length: Workers }, () =>
      startWorker(logs, args)
    )

    // Bounded: the queue drains, or the assertions below say what was left.
    const drained = await waitFor(() => liveMarkers(root) === 0, 300_000, 500)
    const drainedAt = Date.now()
    const watching = await waitFor(() => workers.every(hasStarted), 120_000)
    const exits = await Promise.all(workers.map((worker) => stopWorker(worker, 60_000)))
    const records = readRecords(root)
    assert.isTrue(drained, `the queue drained: ${JSON.stringify(stateCounts(records))}`)
    assert.isTrue(watching, "every worker watches before its SIGTERM")

    // Each worker stopped cleanly on SIGTERM and printed its summary.
    const summaries = workers.map((worker, i) => {
      assert.deepStrictEqual(exits[i], { code: 0, signal: null }, `worker ${worker.pid} exit`)
      return decodeSummary(fs.readFileSync(worker.stdoutFile, "utf8"))
    })

    // The claims, as the workers reported them: each task exactly once, attempt 1.
    const claims = claimedOnceEach(workers, expected)

    // The records agree: one attempt each, by the worker that reported claiming it.
    const claimer = new Map(claims.map((claim) => [claim.task_id, claim.pid] as const))
    assert.strictEqual(records.length, Tasks)
    for (const record of records) {
      assert.strictEqual(record.state, "complete", record.task_id)
      assert.strictEqual(record.attempt, 1, record.task_id)
      assert.strictEqual(record.attempts.length, 1, record.task_id)
      assert.strictEqual(record.attempts[0]?.outcome, "complete", record.task_id)
      assert.strictEqual(record.attempts[0]?.pid, claimer.get(record.task_id), record.task_id)
      assert.isNull(record.lease, record.task_id)
      assert.deepStrictEqual(record.result, { echo: record.payload, provider: "fake-echo" })
    }

    // Each worker's summary counts what its events say it claimed; nothing was lost or retried.
    for (const [i, summary] of summaries.entries()) {
      const worker = workers[i]
      if (worker === undefined) continue
      const own = claims.filter((claim) => claim.pid === worker.pid).length
      assert.deepStrictEqual(
        summary,
        { reason: "SIGTERM", finished: own, failed: 0, retried: 0, cancelled: 0, released: 0, reaped: 0 },
        `summary of worker ${worker.pid}`
      )
    }

    const check = jsonOutput(CheckOutput, await relaykeep(["check", "--root", root]))
    assert.isTrue(check.ok)
    assert.deepStrictEqual(check.invalid_records, [])
    assert.strictEqual(check.records, Tasks)
    assert.strictEqual(check.states.complete, Tasks)

    report("claimRace", {
      seed_ms: seeded - began,
      drain_ms: drainedAt - seeded,
      total_ms: Date.now() - began,
      claims_per_worker: workers.map((worker) => claims.filter((claim) => claim.pid === worker.pid).length)
    })
  })
})
