/**
 * Issue 5, requirement 12: a cancel, a timeout and a shutdown each stop the provider's whole
 * process tree, and no process survives (checked by pid). The scripted fake starts a child that
 * starts a grandchild ignoring SIGTERM, so only the SIGKILL after --kill-grace can stop it; each
 * test also checks that the grandchild did ignore a SIGTERM, so the SIGKILL is what ended it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { CancelOutcome, TaskView } from "../../src/domain/Task.js"
import type { TaskRecord } from "../../src/domain/Task.js"
import { jsonOutput, relaykeep } from "../support/cli.js"
import { isRunning } from "../support/fakeCli.js"
import type { Chaos, Started } from "./support-fence.js"
import {
  logsOf,
  scriptedPayload,
  survivors,
  terminate,
  useChaos,
  waitUntil,
  within
} from "./support-fence.js"

const chaos = useChaos()

/** A tree that would run for a minute: child, and a grandchild that ignores SIGTERM. */
const tree = scriptedPayload({ tree: true, sleep_ms: 60_000 })

/** Submit one tree task, start a watching worker, and wait until the tree's two pids are known. */
const startTree = async (box: Chaos, id: string, workerArgs: ReadonlyArray<string>, payload = tree) => {
  const [receipt] = await box.submit([{ id, payload }])
  if (receipt === undefined) throw new Error("no receipt")
  const worker = box.startWorker("worker", ["--watch", "--kill-grace", "1s", "--poll", "1s", ...workerArgs])
  const pids = await waitUntil(
    "the tree to be ready",
    () => box.treePids(receipt.task_id, 1),
    60_000,
    () => logsOf(worker)
  )
  assert.isTrue(isRunning(pids.child), "the child runs")
  assert.isTrue(isRunning(pids.grandchild), "the grandchild runs")
  return { receipt, worker, pids }
}

/** Wait until the record is in a state it leaves only by a new claim. */
const settled = (box: Chaos, taskId: string, worker: Started, state: TaskRecord["state"]) =>
  waitUntil(
    `the task to be ${state}`,
    () => {
      const record = box.record(taskId)
      return record?.state === state ? record : undefined
    },
    40_000,
    () => `${JSON.stringify(box.record(taskId))}\n${logsOf(worker)}`
  )

/**
 * Neither process of the tree runs, nor any other process of the sandbox but the worker (while
 * it runs), and the grandchild had ignored a SIGTERM before it went: the SIGKILL ended it.
 */
const assertTreeGone = (
  box: Chaos,
  pids: { readonly child: number; readonly grandchild: number },
  taskId: string,
  worker: Started
) => {
  assert.isFalse(isRunning(pids.child), `child ${pids.child} survived`)
  assert.isFalse(isRunning(pids.grandchild), `grandchild ${pids.grandchild} survived`)
  assert.deepStrictEqual(survivors(box, worker.exit() === undefined ? [worker.pid] : []), [], "survivors")
  const ignored = path.join(box.pidsDir, `${taskId}-1.json.term`)
  assert.isTrue(fs.existsSync(ignored), "the grandchild got a SIGTERM (and ignored it)")
}

const stopWorker = async (worker: Started) => {
  terminate(worker.pid)
  const exit = await within("the worker to stop", worker.exited, 40_000)
  assert.deepStrictEqual(exit, { code: 0, signal: null }, logsOf(worker))
  return worker.summary()
}

describe("cancel and timeout kill the process tree (12)", { timeout: 120_000 }, () => {
  it("cancel: the running task is asked to stop, ends cancelled, and its child and grandchild are gone", async () => {
    const box = chaos()
    const { receipt, worker, pids } = await startTree(box, "cancel-me", [])
    const taskId = receipt.task_id
    const receiptArgs = ["--root", box.root, "--task-id", taskId, "--sha", receipt.payload_sha256]

    const outcome = jsonOutput(CancelOutcome, await relaykeep(["cancel", ...receiptArgs]))
    assert.deepStrictEqual(outcome, {
      task_id: taskId,
      cancelled: false,
      cancel_requested: true,
      state: "running"
    })

    await settled(box, taskId, worker, "cancelled")
    // The worker stops the tree before it records the end: by now nothing of it may run.
    assertTreeGone(box, pids, taskId, worker)
    const view = jsonOutput(TaskView, await relaykeep(["read", ...receiptArgs]))
    assert.strictEqual(view.state, "cancelled")
    assert.isNull(view.result)
    assert.deepStrictEqual(
      view.attempts.map((attempt) => attempt.outcome),
      ["cancelled"]
    )
    assert.isNotNull(view.cancel_requested_at)

    const summary = await stopWorker(worker)
    assert.strictEqual(summary.cancelled, 1)
    assert.strictEqual(summary.finished, 0)
  })

  it("timeout: the task fails with ProviderTimeout (retryable, one attempt allowed) and no pid survives", async () => {
    const box = chaos()
    // Long enough for the tree to be up (two node processes) on a loaded machine before it ends.
    const { receipt, worker, pids } = await startTree(box, "too-slow", [
      "--task-timeout",
      "8s",
      "--max-attempts",
      "1"
    ])
    const taskId = receipt.task_id

    const record = await settled(box, taskId, worker, "failed")
    assertTreeGone(box, pids, taskId, worker)
    assert.strictEqual(record.error?.tag, "ProviderTimeout")
    assert.strictEqual(record.error?.retryable, true)
    assert.strictEqual(record.attempt, 1)
    assert.deepStrictEqual(
      record.attempts.map((attempt) => [attempt.outcome, attempt.error?.tag]),
      [["failed", "ProviderTimeout"]]
    )
    // The attempt never got past its sleep: started, never done.
    assert.deepStrictEqual(
      box
        .effects()
        .filter((effect) => effect.task_id === taskId)
        .map((effect) => effect.event),
      ["start"]
    )

    const summary = await stopWorker(worker)
    assert.strictEqual(summary.failed, 1)
  })
})

describe("shutdown kills the process tree and gives the task back (12)", { timeout: 120_000 }, () => {
  for (const { maxAttempts, state } of [
    { maxAttempts: "1", state: "failed" },
    { maxAttempts: "2", state: "queued" }
  ] as const) {
    it(`SIGTERM with --grace 1s: the worker exits 0, the task is ${state} (max attempts ${maxAttempts}), no pid survives`, async () => {
      const box = chaos()
      const { receipt, worker, pids } = await startTree(box, `shutdown-${maxAttempts}`, [
        "--grace",
        "1s",
        "--max-attempts",
        maxAttempts,
        "--retry-backoff",
        "1s"
      ])
      const taskId = receipt.task_id

      const summary = await stopWorker(worker)
      assert.strictEqual(summary.reason, "SIGTERM")
      assert.strictEqual(summary.released, 1)
      assert.strictEqual(summary.finished, 0)
      assertTreeGone(box, pids, taskId, worker)

      const record = box.record(taskId)
      assert.strictEqual(record?.state, state, JSON.stringify(record))
      assert.strictEqual(record?.attempt, 1)
      assert.isNull(record?.lease)
      assert.deepStrictEqual(
        record?.attempts.map((attempt) => [attempt.outcome, attempt.error?.tag, attempt.error?.retryable]),
        [["failed", "shutdown", true]]
      )
      // Released without a backoff: a task given back at shutdown is ready at once.
      assert.isUndefined(record?.not_before)
      assert.strictEqual(record?.error?.tag, state === "failed" ? "shutdown" : undefined)
    })
  }

  it("a second SIGTERM during a long grace stops at once: reason forced, the task released, no pid survives", async () => {
    const box = chaos()
    const { receipt, worker, pids } = await startTree(box, "forced", [
      "--grace",
      "120s",
      "--max-attempts",
      "1"
    ])
    const taskId = receipt.task_id

    terminate(worker.pid)
    await waitUntil(
      "the worker to start its grace",
      () => (worker.events().some((event) => event.event === "stopping") ? true : undefined),
      20_000,
      () => logsOf(worker)
    )
    assert.isUndefined(worker.exit(), "the first signal waits for the running task")
    terminate(worker.pid)
    // Far sooner than the 120 s grace: the second signal skipped it.
    const exit = await within("the forced worker to stop", worker.exited, 40_000)
    assert.deepStrictEqual(exit, { code: 0, signal: null }, logsOf(worker))
    const summary = worker.summary()
    assert.strictEqual(summary.reason, "forced")
    assert.strictEqual(summary.released, 1)
    assertTreeGone(box, pids, taskId, worker)

    const record = box.record(taskId)
    assert.strictEqual(record?.state, "failed")
    assert.deepStrictEqual(
      record?.attempts.map((attempt) => [attempt.outcome, attempt.error?.tag]),
      [["failed", "shutdown"]]
    )
  })
})

describe(
  "cancel and shutdown reach a grandchild that left the process group (issue 15, point 7)",
  {
    timeout: 120_000
  },
  () => {
    for (const escape of ["setsid", "session"] as const) {
      const escaping = scriptedPayload({ tree: true, sleep_ms: 60_000, escape })
      it(`cancel: a grandchild that escaped (${escape}) is gone with the child`, async () => {
        const box = chaos()
        const { receipt, worker, pids } = await startTree(box, `cancel-${escape}`, [], escaping)
        const taskId = receipt.task_id
        await relaykeep(["cancel", "--root", box.root, "--task-id", taskId, "--sha", receipt.payload_sha256])
        await settled(box, taskId, worker, "cancelled")
        assertTreeGone(box, pids, taskId, worker)
        await stopWorker(worker)
      })

      it(`shutdown: a grandchild that escaped (${escape}) is gone with the child`, async () => {
        const box = chaos()
        const { receipt, worker, pids } = await startTree(
          box,
          `shutdown-${escape}`,
          ["--grace", "1s", "--max-attempts", "1"],
          escaping
        )
        const summary = await stopWorker(worker)
        assert.strictEqual(summary.released, 1)
        assertTreeGone(box, pids, receipt.task_id, worker)
      })
    }
  }
)
