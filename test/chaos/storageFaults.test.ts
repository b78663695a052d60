/**
 * Requirement 13: injected ENOSPC, EIO on fsync and torn writes through the FileSystem layer.
 * The operation fails with StorageError, the worker stops claiming rather than retrying the
 * fsync, and every record still decodes.
 *
 * A watching worker runs five tasks, one at a time, on the file store over the fault-injecting
 * FileSystem (test/support/FaultyFileSystem.ts). Two tasks succeed; then a fault is armed so
 * that it hits the third task's completion (armed during its provider run) or its claim
 * (armed when the second task's `finished` event is written). The watch must end with
 * StorageError, with no claim, provider run or fsync after the fault. Then a healthy process
 * opens the same root: every record decodes, every acknowledged task is queued, running under
 * the dead worker's lease (reapable) or finished, and healthy passes finish all of them.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Layer, Logger, LogLevel, Option, Ref, Schema } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { Receipt, RetryPolicy } from "../../src/domain/Task.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import type { ProviderTask } from "../../src/services/Provider.js"
import { Shutdown } from "../../src/services/Shutdown.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { workerOutputLayer } from "../../src/worker/events.js"
import { runPass } from "../../src/worker/pass.js"
import { runWatch } from "../../src/worker/watch.js"
import type { Fault } from "../support/FaultyFileSystem.js"
import { describeFault } from "../support/injection.js"
import { crashingProcess, nextProcess, restartViolations, untypedErrors } from "../support/restart.js"
import { faultyFileStoreAt, fileStoreAt, tempDir } from "../support/stores.js"

const workerId = "chaos-worker"
// No backoff, so that a reaped task is claimable by the very next pass.
const retry: RetryPolicy = { max_attempts: 2, backoff_initial_ms: 0, backoff_max_ms: 0 }
const names = ["t1", "t2", "t3", "t4", "t5"]

interface StorageCase {
  readonly name: string
  /** What the fault hits: the third task's completion, or its claim. */
  readonly at: "complete" | "claim"
  readonly fault: Fault
  /** The failing call: on the record's temp file, or the fsync of the tasks directory. */
  readonly target: "record temp file" | "tasks directory"
  /** Where the third task is left: the write never happened, or it did (only its dir fsync failed). */
  readonly third: "queued" | "running" | "complete"
}

// Per operation, in order: the lock's temp file is written (write #1, no fsync), then the
// record's temp file (write #2), its fsync (sync #1), the rename, the tasks directory's fsync
// (sync #2; a claim has none: docs/file-store.md, "Leases and fencing"). Each test checks that
// its fault really hit the call it names.
const cases: ReadonlyArray<StorageCase> = [
  {
    name: "ENOSPC writing the completion's record",
    at: "complete",
    fault: { _tag: "Fail", operation: "write", nth: 2, errno: "ENOSPC" },
    target: "record temp file",
    third: "running"
  },
  {
    name: "EIO on the fsync of the completion's record",
    at: "complete",
    fault: { _tag: "Fail", operation: "sync", nth: 1, errno: "EIO" },
    target: "record temp file",
    third: "running"
  },
  {
    name: "EIO on the directory fsync after the completion's rename",
    at: "complete",
    fault: { _tag: "Fail", operation: "sync", nth: 2, errno: "EIO" },
    target: "tasks directory",
    third: "complete"
  },
  {
    name: "a torn write of the completion's record",
    at: "complete",
    fault: { _tag: "Tear", nth: 2, crash: false },
    target: "record temp file",
    third: "running"
  },
  {
    name: "a torn write of the completion's record, and the process dies there",
    at: "complete",
    fault: { _tag: "Tear", nth: 2, crash: true },
    target: "record temp file",
    third: "running"
  },
  {
    name: "ENOSPC writing the claim's record",
    at: "claim",
    fault: { _tag: "Fail", operation: "write", nth: 2, errno: "ENOSPC" },
    target: "record temp file",
    third: "queued"
  },
  {
    name: "EIO on the fsync of the claim's record",
    at: "claim",
    fault: { _tag: "Fail", operation: "sync", nth: 1, errno: "EIO" },
    target: "record temp file",
    third: "queued"
  },
  {
    name: "a torn write of the claim's record",
    at: "claim",
    fault: { _tag: "Tear", nth: 2, crash: false },
    target: "record temp file",
    third: "queued"
  }
]

const EventName = Schema.parseJson(Schema.Struct({ event: Schema.String }))
const eventName = (line: string) =>
  Option.match(Schema.decodeUnknownOption(EventName)(line), { onNone: () => "", onSome: (e) => e.event })

const succeed = (task: ProviderTask) =>
  Effect.succeed({ result: { ran: task.taskId, attempt: task.attempt } })

const quiet = Logger.minimumLogLevel(LogLevel.Error)

describe("storage faults under a watching worker (requirement 13)", () => {
  for (const c of cases) {
    it.scopedLive(
      `${c.name} (${describeFault(c.fault)}): StorageError, no claim after it, nothing lost`,
      () =>
        Effect.gen(function* () {
          const root = yield* tempDir
          const { store: faulty, plan } = yield* faultyFileStoreAt(root, crashingProcess)
          const receipts = yield* Effect.forEach(names, (name) =>
            faulty.submit({ clientRequestId: ClientRequestId.make(name), payload: { name } })
          )

          // What the worker does once the fault has happened: it should do nothing at all.
          const claimsAfter = yield* Ref.make(0)
          const runsAfter = yield* Ref.make(0)
          const runs = yield* Ref.make(0)
          const finished = yield* Ref.make(0)
          const output = yield* Ref.make("")
          const afterFault = (counter: Ref.Ref<number>) =>
            Effect.whenEffect(
              Ref.update(counter, (n) => n + 1),
              plan.fired
            )
          const store: TaskStoreShape = {
            ...faulty,
            claim: (taskId, request) =>
              Effect.zipRight(afterFault(claimsAfter), faulty.claim(taskId, request))
          }
          const run = (task: ProviderTask) =>
            Effect.gen(function* () {
              yield* afterFault(runsAfter)
              const n = yield* Ref.updateAndGet(runs, (k) => k + 1)
              if (c.at === "complete" && n === 3) yield* plan.arm(c.fault)
              return yield* succeed(task)
            })
          const write = (text: string) =>
            Effect.gen(function* () {
              yield* Ref.update(output, (all) => all + text)
              if (eventName(text.trim()) !== "finished") return
              const n = yield* Ref.updateAndGet(finished, (k) => k + 1)
              if (c.at === "claim" && n === 2) yield* plan.arm(c.fault)
            })

          const exit = yield* runWatch({
            workerId,
            leaseMillis: 60_000,
            retry,
            concurrency: 1,
            maxPerProvider: new Map(),
            pollMillis: 60_000,
            graceMillis: 10_000,
            cancelPollMillis: 60_000,
            // Only the first heartbeat, before the fault is armed: the cases count the writes after it.
            heartbeatMillis: 600_000
          }).pipe(
            Effect.provide(
              Layer.mergeAll(
                Layer.succeed(TaskStore, store),
                Provider.layerTest(run),
                Shutdown.layerManual,
                workerOutputLayer("json", write),
                Host.layerTest(crashingProcess)
              )
            ),
            Effect.timeout("30 seconds"),
            Effect.exit
          )

          // Every violation is collected, so that a failure shows the whole picture at once.
          const problems: Array<string> = []
          const expect = (ok: boolean, problem: string) => {
            if (!ok) problems.push(problem)
          }

          // The worker stopped: no claim, no provider run, no fsync or rename after the fault.
          expect(yield* plan.fired, "the fault never fired")
          const claimed = yield* Ref.get(claimsAfter)
          const ran = yield* Ref.get(runsAfter)
          expect(claimed === 0, `${claimed} claims after the fault`)
          expect(ran === 0, `${ran} provider runs after the fault`)
          const journal = yield* plan.journal
          const kind =
            c.fault._tag === "Tear" ? "write" : c.fault._tag === "Fail" ? c.fault.operation : "none"
          const nth = c.fault._tag === "Tear" || c.fault._tag === "Fail" ? c.fault.nth : 0
          const failedAt = journal.flatMap((entry, i) => (entry.kind === kind ? [i] : []))[nth - 1] ?? -1
          const later = journal.slice(failedAt + 1).filter((e) => e.kind === "sync" || e.kind === "rename")
          for (const entry of later) problems.push(`${entry.method} ${entry.path} after the fault`)

          // The watch failed with StorageError, and nothing else (a watch that carried on times out).
          expect(Exit.isFailure(exit), "the watch did not fail")
          problems.push(...untypedErrors(exit, ["StorageError"]).map((p) => `the watch ${p}`))
          const events = (yield* Ref.get(output))
            .split("\n")
            .filter((line) => line !== "")
            .map(eventName)
          const claims = events.filter((e) => e === "claimed").length
          expect(claims === (c.at === "complete" ? 3 : 2), `${claims} claimed events`)
          expect(events.includes("storage_error"), "no storage_error event")
          expect(
            /"event":"stopped","reason":"storage_error"/.test(yield* Ref.get(output)),
            "no stopped event with reason storage_error"
          )

          // The fault hit the call this case is about (a check of the test itself).
          const failed = journal[failedAt]?.path ?? "nothing"
          if (c.target === "tasks directory") expect(failed === `${root}/tasks`, `the fault hit ${failed}`)
          else expect(failed.startsWith(`${root}/tasks/.tmp-`), `the fault hit ${failed}`)

          // A healthy process on the same root: everything decodes, nothing acknowledged is lost.
          const healthy = yield* fileStoreAt(root, nextProcess)
          problems.push(
            ...(yield* restartViolations(healthy, root, receipts)).map((p) => `after restart: ${p}`)
          )
          const report = yield* healthy.check
          expect(report.records === names.length, `${report.records} records`)
          const stateOf = (receipt: Receipt) =>
            healthy.read(receipt.task_id, receipt.payload_sha256).pipe(
              Effect.map((view) => `${view.state}@${view.attempt}`),
              Effect.catchAll((error) => Effect.succeed(error._tag))
            )
          const states = yield* Effect.forEach(receipts, stateOf)
          const expected = [
            "complete@1",
            "complete@1",
            `${c.third}@${c.third === "queued" ? 0 : 1}`,
            "queued@0",
            "queued@0"
          ]
          expect(
            JSON.stringify(states) === JSON.stringify(expected),
            `states ${states.join(", ")}, expected ${expected.join(", ")}`
          )
          const live = yield* healthy.live
          for (const record of live.running) {
            // Running only under the dead worker's lease, which a reaper may take back.
            expect(
              record.lease?.worker_id === workerId && record.lease.pid === crashingProcess.pid,
              `${record.task_id} runs under ${JSON.stringify(record.lease)}`
            )
          }

          // Healthy passes reap what the dead worker held and finish everything.
          const pass = runPass({ workerId: "healer", leaseMillis: 60_000, retry }).pipe(
            Effect.provide(
              Layer.mergeAll(
                Layer.succeed(TaskStore, healthy),
                Provider.layerTest(succeed),
                Host.layerTest(nextProcess)
              )
            )
          )
          const reaped: Array<string> = []
          for (let i = 0; i < 3; i++) {
            const passReport = yield* pass
            reaped.push(...passReport.reaped.map((r) => `${r.task_id}:${r.reason}:${r.state}`))
          }
          const expectedReaped = c.third === "running" ? [`${receipts[2]?.task_id}:owner_dead:queued`] : []
          expect(
            JSON.stringify(reaped) === JSON.stringify(expectedReaped),
            `reaped ${reaped.join(", ") || "nothing"}`
          )
          const finalStates = yield* Effect.forEach(receipts, stateOf)
          expect(
            finalStates.every((state) => state.startsWith("complete@")),
            `after healthy passes: ${finalStates.join(", ")}`
          )
          for (const bad of (yield* healthy.check).invalid_records)
            problems.push(`damaged record ${bad.file}: ${bad.reason}`)
          assert.deepStrictEqual(problems, [])
        }).pipe(Effect.provide(quiet)),
      60_000
    )
  }
})
