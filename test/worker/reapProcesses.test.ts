/**
 * A reaper stops what a lost worker left running, and only what can be shown to be the lost
 * attempt's (a pid may have been reused by a process that has nothing to do with the task):
 * every process that carries the task's id and attempt in its environment, and the members of the
 * provider's process group and session recorded on the attempt while one of them still carries it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Schedule } from "effect"
import type { Scope } from "effect"
import { spawn } from "node:child_process"
import { existsSync } from "node:fs"
import { ClientRequestId } from "../../src/domain/ids.js"
import { Host } from "../../src/services/Host.js"
import { attemptMarker } from "../../src/services/ProcessTree.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { reapOrphans } from "../../src/worker/reap.js"
import type { Sandbox } from "../support/fakeCli.js"
import { fakeCodex, isRunning, sandbox } from "../support/fakeCli.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

/** A process group of its own (a node that sleeps), with `env`; killed when the scope closes. */
const group = (env: Readonly<Record<string, string>>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60000)"], {
        detached: true,
        stdio: "ignore",
        env: { PATH: process.env["PATH"] ?? "", ...env }
      })
      child.unref()
      const pid = child.pid
      if (pid === undefined) throw new Error("the child did not start")
      return pid
    }),
    (pid) =>
      Effect.sync(() => {
        try {
          process.kill(-pid, "SIGKILL")
        } catch {
          // already gone
        }
      })
  )

/** The store's worker (pid 300) is dead for the reaper (pid 999), on the same host. */
const layers = Layer.mergeAll(
  memoryTaskStoreLayer().pipe(Layer.provide(Host.layerTest({ pid: 300, hostname: "here" }))),
  Host.layerTest({ pid: 999, hostname: "here" })
)

/** A running task of a lost worker whose attempt names the group `start` makes for its task id. */
const runningWith = <E>(name: string, start: (taskId: string) => Effect.Effect<number, E, Scope.Scope>) =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const receipt = yield* store.submit({ clientRequestId: ClientRequestId.make(name), payload: {} })
    const claimed = yield* store.claim(receipt.task_id, { workerId: "lost", leaseMillis: 60_000 })
    if (Option.isNone(claimed)) return yield* Effect.dieMessage("not claimed")
    const pgid = yield* start(receipt.task_id)
    yield* store.recordProcess(receipt.task_id, claimed.value.lease, pgid)
    return { taskId: receipt.task_id, pgid }
  })

const gone = (pid: number) =>
  Effect.sync(() => !isRunning(pid)).pipe(
    Effect.repeat({ until: (done) => done, schedule: Schedule.spaced(Duration.millis(50)) }),
    Effect.timeoutOption(Duration.seconds(10)),
    Effect.map(Option.isSome)
  )

/** Wait (bounded) until `pid` runs with `marker` readable in its environment in /proc. */
const carrying = (pid: number, marker: Readonly<Record<string, string>>) =>
  Effect.flatMap(Host, (host) =>
    host.processTable(marker).pipe(
      Effect.repeat({
        until: Option.exists((table) => table.some((entry) => entry.pid === pid && entry.carriesMarker)),
        schedule: Schedule.spaced(Duration.millis(50))
      }),
      Effect.timeout(Duration.seconds(5))
    )
  )

/**
 * What a lost worker's provider leaves: the fake codex playing `escapes`, spawned detached with
 * the task's marker as the launcher spawns it, and once it reported them, its two grandchildren:
 * a session member with a stripped environment and a setsid escapee that kept it.
 */
const escapingProvider = (box: Sandbox, extra: Readonly<Record<string, string>>) => (taskId: string) =>
  Effect.gen(function* () {
    const pid = yield* Effect.sync(() => {
      const child = spawn(fakeCodex, [], {
        detached: true,
        stdio: "ignore",
        env: { ...box.env("escapes", extra), ...attemptMarker(taskId, 1) }
      })
      child.unref()
      if (child.pid === undefined) throw new Error("the fake did not start")
      return child.pid
    })
    yield* Effect.sync(() => existsSync(box.pidsFile)).pipe(
      Effect.repeat({ until: (ready) => ready, schedule: Schedule.spaced(Duration.millis(50)) }),
      Effect.timeout(Duration.seconds(20))
    )
    return pid
  })

describe("reaping stops a lost attempt's processes", { timeout: 60_000 }, () => {
  it.scopedLive(
    "Host.processTable tells which live processes carry a marker, and their group and session",
    () =>
      Effect.gen(function* () {
        const host = yield* Host
        const pid = yield* group({ RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "2" })
        const entry = (marker: Record<string, string>) =>
          Effect.map(host.processTable(marker), (table) =>
            Option.flatMap(table, (entries) =>
              Option.fromNullable(entries.find((found) => found.pid === pid))
            )
          )
        // Wait (bounded) until the child has exec'd node, with its environment readable in /proc.
        yield* carrying(pid, { RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "2" })
        assert.deepStrictEqual(
          yield* entry({ RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "2" }),
          Option.some({ pid, pgid: pid, sid: pid, carriesMarker: true })
        )
        const carries = (marker: Record<string, string>) =>
          Effect.map(
            entry(marker),
            Option.exists((found) => found.carriesMarker)
          )
        assert.isFalse(yield* carries({ RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "1" }))
        assert.isFalse(yield* carries({ RELAYKEEP_TASK_ID: "other", RELAYKEEP_ATTEMPT: "2" }))
        assert.isFalse(yield* carries({}), "an empty marker is carried by nobody")
        yield* Effect.sync(() => process.kill(-pid, "SIGKILL"))
        assert.isTrue(yield* gone(pid))
        assert.isTrue(Option.isNone(yield* entry({})), "a process that is gone is not in the table")
      }).pipe(Effect.provide(Host.layerTest({})))
  )

  it.scopedLive("the recorded group is stopped only while it still serves the lost attempt", () =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      // A group whose pid was reused by something else: it does not carry the task's identity.
      const reused = yield* runningWith("reused", () => group({ UNRELATED: "1" }))
      // The provider the lost worker started, with the identity the CLI launcher gives it.
      const lost = yield* runningWith("lost", (taskId) =>
        group({ RELAYKEEP_TASK_ID: taskId, RELAYKEEP_ATTEMPT: "1" })
      )
      const recorded = yield* store.live
      assert.sameMembers(
        recorded.running.map((record) => record.attempts[0]?.process_group),
        [reused.pgid, lost.pgid]
      )
      // Wait (bounded) until the child's environment is readable in /proc.
      yield* carrying(lost.pgid, attemptMarker(lost.taskId, 1))

      const report = yield* reapOrphans
      const byTask = new Map(report.reaped.map((task) => [task.task_id, task]))
      assert.strictEqual(byTask.get(lost.taskId)?.stopped_process_group, lost.pgid)
      assert.strictEqual(byTask.get(lost.taskId)?.reason, "owner_dead")
      assert.isTrue(yield* gone(lost.pgid), "the lost attempt's processes are stopped")
      assert.isTrue(byTask.has(reused.taskId), "the other task is reaped too")
      assert.isUndefined(byTask.get(reused.taskId)?.stopped_process_group)
      assert.isTrue(isRunning(reused.pgid), "a group that does not serve the attempt is left alone")
    }).pipe(Effect.provide(layers))
  )

  it.scopedLive(
    "a provider still running: its session member and its setsid escapee are stopped with it",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const lost = yield* runningWith("escapes", escapingProvider(box, {}))
        const pids = box.pids()
        const escapee = pids.escapee ?? -1
        assert.strictEqual(pids.child, lost.pgid)
        for (const pid of [pids.child, pids.grandchild, escapee]) assert.isTrue(isRunning(pid), `${pid} runs`)
        yield* carrying(lost.pgid, attemptMarker(lost.taskId, 1))

        const report = yield* reapOrphans
        assert.strictEqual(report.reaped[0]?.stopped_process_group, lost.pgid)
        assert.isTrue(yield* gone(pids.child), "the provider is stopped")
        assert.isTrue(
          yield* gone(pids.grandchild),
          "its session member (no marker, group of its own) is stopped"
        )
        assert.isTrue(yield* gone(escapee), "its setsid escapee (marker kept) is stopped")
        assert.deepStrictEqual(box.survivors(), [])
        // Both ignore SIGTERM: they got one each, then SIGKILL after the grace.
        assert.deepStrictEqual(box.ignoredTerms(), ["SIGTERM ignored", "SIGTERM ignored"])
      }).pipe(Effect.provide(layers))
  )

  it.scopedLive(
    "a provider that exited: its setsid escapee is stopped, its unmarked session member is left alone",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const lost = yield* runningWith("exited", escapingProvider(box, { FAKE_DAEMON: "1" }))
        const pids = box.pids()
        const escapee = pids.escapee ?? -1
        assert.isTrue(yield* gone(pids.child), "the provider answered and exited")
        assert.isTrue(isRunning(pids.grandchild) && isRunning(escapee), "both grandchildren run on")
        yield* carrying(escapee, attemptMarker(lost.taskId, 1))

        const report = yield* reapOrphans
        assert.strictEqual(report.reaped[0]?.stopped_process_group, lost.pgid)
        assert.isTrue(yield* gone(escapee), "the escapee carries the attempt's marker: stopped")
        // Nothing in its session carries the marker any more, and a session id alone proves nothing
        // to a reaper (the pid may have been reused): the member is left alone (and killed below).
        assert.isTrue(isRunning(pids.grandchild), "the unmarked session member is left alone")
      }).pipe(Effect.provide(layers))
  )
})
