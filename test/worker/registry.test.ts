/** How `relaykeep workers` and the dashboard's health join the registry with the leases. */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { StorageError } from "../../src/domain/errors.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { ClientRequestId, PayloadSha256, TaskId } from "../../src/domain/ids.js"
import type { TaskRecord } from "../../src/domain/Task.js"
import { isoTime } from "../../src/domain/time.js"
import * as Transitions from "../../src/domain/transitions.js"
import type { WorkerPresence } from "../../src/domain/worker.js"
import { presenceAt } from "../support/presence.js"
import { currentWorkers, workersOrLeases, workersView } from "../../src/worker/registry.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

const Minute = 60_000
const now = 10 * 60 * Minute

/** An entry for a run of `workerId` on host "box", last seen `seenAgo` ms before now. */
const entry = (
  digit: string,
  workerId: string,
  seenAgo: number,
  extra: Partial<WorkerPresence> = {}
): WorkerPresence =>
  presenceAt(digit, workerId, now - seenAgo, {
    pid: 1,
    started_at: isoTime(now - seenAgo - Minute),
    ...extra
  })

/** A task running under a lease of `workerId` on `host`, pid `pid`. */
const runningTask = (digit: string, workerId: string, host = "box", pid = 1): TaskRecord => {
  const queued = Transitions.newRecord({
    taskId: TaskId.make(digit.repeat(64)),
    clientRequestId: ClientRequestId.make(`task-${digit}`),
    payload: {},
    payloadSha256: PayloadSha256.make("0".repeat(64)),
    now: now - Minute
  })
  const claimed = Transitions.claim(
    queued,
    { worker_id: workerId, pid, host, boot_id: "boot", owner_token: `token-${digit}` },
    now - 1_000,
    60_000
  )
  if (claimed === undefined) throw new Error("not claimable")
  return claimed
}

describe("workersView", () => {
  it("an idle watcher, a late one and a stopping one show with their states; late overrides the status", () => {
    const view = workersView(
      [
        entry("a", "idle", 1_000),
        entry("b", "killed", 5 * Minute, { status: "stopping" }),
        entry("c", "leaving", 1_000, { status: "stopping" })
      ],
      [],
      now
    )
    assert.deepStrictEqual(
      view.map((worker) => [worker.worker_id, worker.state, worker.running]),
      [
        ["idle", "watching", []],
        ["killed", "late", []],
        ["leaving", "stopping", []]
      ]
    )
  })

  it("leases go to their holder's entry; a holder with no entry shows unannounced, by worker id then pid", () => {
    const busy = runningTask("1", "busy")
    const passB = runningTask("2", "pass", "other", 9)
    const passA = runningTask("3", "pass", "other", 3)
    const view = workersView([entry("a", "busy", 1_000)], [passB, busy, passA], now)
    assert.deepStrictEqual(
      view.map((worker) => [
        worker.worker_id,
        worker.pid,
        worker.state,
        worker.running,
        worker.lease_expires_at
      ]),
      [
        ["busy", 1, "watching", [busy.task_id], busy.lease?.expires_at ?? null],
        ["pass", 3, "unannounced", [passA.task_id], passA.lease?.expires_at ?? null],
        ["pass", 9, "unannounced", [passB.task_id], passB.lease?.expires_at ?? null]
      ]
    )
    const unannounced = view[1]
    assert.deepInclude(unannounced, {
      instance: null,
      version: null,
      last_heartbeat_at: null,
      concurrency: null
    })
  })

  it("a name, host and pid used by two runs: the live run holds the leases, not the late one before it", () => {
    const task = runningTask("1", "box-worker")
    const old = entry("a", "box-worker", 10 * Minute) // killed; the container restarted with pid 1
    const live = entry("b", "box-worker", 1_000)
    const view = workersView([old, live], [task], now)
    assert.deepStrictEqual(
      view.map((worker) => [worker.instance, worker.state, worker.running]),
      [
        [old.instance, "late", []],
        [live.instance, "watching", [task.task_id]]
      ]
    )
    // Both late: the later start holds them.
    const older = entry("c", "box-worker", 20 * Minute)
    const both = workersView([older, old], [task], now)
    assert.deepStrictEqual(
      both.map((worker) => worker.running),
      [[], [task.task_id]]
    )
  })

  it("entries silent for over an hour are left out", () => {
    const view = workersView([entry("a", "gone", 61 * Minute), entry("b", "recent", 59 * Minute)], [], now)
    assert.deepStrictEqual(
      view.map((worker) => worker.worker_id),
      ["recent"]
    )
  })
})

describe("workersOrLeases", () => {
  it.scoped("a registry that cannot be read: the lease holders, and why; currentWorkers fails with it", () =>
    Effect.gen(function* () {
      const memory = yield* Effect.provide(
        TaskStore,
        memoryTaskStoreLayer().pipe(Layer.provide(Host.layerTest({})))
      )
      const refused = new StorageError({
        operation: "list the workers of",
        path: "postgres db",
        reason: "permission denied for table workers"
      })
      const store = { ...memory, workers: { ...memory.workers, list: Effect.fail(refused) } }
      const receipt = yield* store.submit({ clientRequestId: ClientRequestId.make("held"), payload: {} })
      yield* store.claim(receipt.task_id, { workerId: "holder", leaseMillis: 60_000 })
      const report = yield* Effect.provideService(workersOrLeases, TaskStore, store)
      assert.strictEqual(report.registry_error, refused.message)
      assert.deepStrictEqual(
        report.workers.map((worker) => [worker.worker_id, worker.state, worker.running]),
        [["holder", "unannounced", [receipt.task_id]]]
      )
      const failed = yield* Effect.flip(Effect.provideService(currentWorkers, TaskStore, store))
      assert.strictEqual(failed, refused)
    })
  )
})
