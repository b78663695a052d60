/**
 * A reaper stops what a lost worker left running: the provider's process group recorded on the
 * attempt, and only while a member of that group still carries the task's id and attempt (a
 * pid may have been reused by a process that has nothing to do with the task).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Schedule } from "effect"
import type { Scope } from "effect"
import { spawn } from "node:child_process"
import { ClientRequestId } from "../../src/domain/ids.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { reapOrphans } from "../../src/worker/reap.js"
import { isRunning } from "../support/fakeCli.js"

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
  TaskStore.layerMemory().pipe(Layer.provide(Host.layerTest({ pid: 300, hostname: "here" }))),
  Host.layerTest({ pid: 999, hostname: "here" })
)

/** A running task of a lost worker whose attempt names the group `start` makes for its task id. */
const runningWith = (name: string, start: (taskId: string) => Effect.Effect<number, never, Scope.Scope>) =>
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

describe("reaping stops a lost attempt's processes", () => {
  it.scopedLive("Host.groupServes finds a group by the environment of its members", () =>
    Effect.gen(function* () {
      const host = yield* Host
      const pid = yield* group({ RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "2" })
      const serves = (variables: Record<string, string>) =>
        host
          .groupServes(pid, variables)
          .pipe(
            Effect.repeat({ until: (found) => found, schedule: Schedule.spaced(Duration.millis(50)) }),
            Effect.timeoutOption(Duration.seconds(5)),
            Effect.map(Option.isSome)
          )
      assert.isTrue(yield* serves({ RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "2" }))
      assert.isFalse(yield* host.groupServes(pid, { RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "1" }))
      assert.isFalse(yield* host.groupServes(pid, { RELAYKEEP_TASK_ID: "other", RELAYKEEP_ATTEMPT: "2" }))
      yield* Effect.sync(() => process.kill(-pid, "SIGKILL"))
      assert.isTrue(yield* gone(pid))
      assert.isFalse(yield* host.groupServes(pid, { RELAYKEEP_TASK_ID: "abc", RELAYKEEP_ATTEMPT: "2" }))
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
      const host = yield* Host
      yield* host
        .groupServes(lost.pgid, { RELAYKEEP_TASK_ID: lost.taskId, RELAYKEEP_ATTEMPT: "1" })
        .pipe(
          Effect.repeat({ until: (found) => found, schedule: Schedule.spaced(Duration.millis(50)) }),
          Effect.timeout(Duration.seconds(5))
        )

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
})
