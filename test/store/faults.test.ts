/**
 * Failure injection into the file store: every write, fsync, rename, link and remove of submit,
 * claim, complete, fail and cancel fails (ENOSPC/EIO), is torn, or is the last thing the process
 * does before it dies. Each time: the error is a typed StorageError, and the next process on the
 * same root finds every acknowledged task, no damaged record, and a consistent index.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import type { Case, LockPhase } from "../support/injection.js"
import { countCalls, failuresOf, Families, faultsOf, inject, leftLocks } from "../support/injection.js"

const worker = { workerId: "w1", leaseMillis: 60_000 }
const target = "target"
const submitTarget = (store: TaskStoreShape) =>
  store.submit({ clientRequestId: ClientRequestId.make(target), payload: { job: 1 } })
const submitBystander = (store: TaskStoreShape) =>
  store.submit({ clientRequestId: ClientRequestId.make("bystander"), payload: { job: 0 } })

/** The target submitted and claimed, with a bystander queued beside it. */
const claimed = (store: TaskStoreShape) =>
  Effect.gen(function* () {
    const bystander = yield* submitBystander(store)
    const receipt = yield* submitTarget(store)
    const claim = yield* store.claim(receipt.task_id, worker)
    if (Option.isNone(claim)) return yield* Effect.dieMessage("setup: the target was not claimed")
    return { acknowledged: [bystander, receipt], lease: claim.value.lease, taskId: receipt.task_id }
  })

const cases: ReadonlyArray<Case> = [
  {
    name: "submit",
    target,
    before: "absent",
    after: "queued@0",
    prepare: (store) =>
      Effect.map(submitBystander(store), (bystander) => ({
        acknowledged: [bystander],
        operation: (s) => Effect.map(submitTarget(s), (receipt) => [receipt])
      }))
  },
  {
    name: "claim",
    target,
    before: "queued@0",
    after: "running@1",
    prepare: (store) =>
      Effect.map(Effect.all([submitBystander(store), submitTarget(store)]), (acknowledged) => ({
        acknowledged,
        operation: (s) => Effect.as(s.claim(acknowledged[1].task_id, worker), [])
      }))
  },
  {
    name: "complete",
    target,
    before: "running@1",
    after: "complete@1",
    prepare: (store) =>
      Effect.map(claimed(store), ({ acknowledged, lease, taskId }) => ({
        acknowledged,
        operation: (s) => Effect.as(s.complete(taskId, lease, { answer: 42 }), [])
      }))
  },
  {
    name: "fail",
    target,
    before: "running@1",
    after: "failed@1",
    prepare: (store) =>
      Effect.map(claimed(store), ({ acknowledged, lease, taskId }) => ({
        acknowledged,
        operation: (s) => Effect.as(s.fail(taskId, lease, { tag: "ProviderFailed", message: "boom" }), [])
      }))
  },
  {
    name: "cancel",
    target,
    before: "queued@0",
    after: "cancelled@0",
    prepare: (store) =>
      Effect.map(Effect.all([submitBystander(store), submitTarget(store)]), (acknowledged) => ({
        acknowledged,
        operation: (s) => Effect.as(s.cancel(acknowledged[1].task_id, acknowledged[1].payload_sha256), [])
      }))
  }
]

describe("file store under injected faults", () => {
  for (const c of cases) {
    describe(c.name, () => {
      it.scoped(
        "is durable: two fsyncs (a claim: its record's only) and one rename (a link for a new record) per write, no fault-free violation",
        () =>
          Effect.gen(function* () {
            const counts = yield* countCalls(c)
            // A claim may be lost to a machine crash (the reboot reaps every lease of the old boot
            // anyway), so only its record's data is fsynced, not the directory's rename.
            assert.strictEqual(counts.sync, c.name === "claim" ? 1 : 2)
            // A submit links its record into place and takes no lock, so that link is its only one.
            if (c.name === "submit") assert.deepStrictEqual([counts.rename, counts.link], [0, 1])
            else assert.strictEqual(counts.rename, 1)
            assert.isAtLeast(counts.write, 2)
            assert.deepStrictEqual(
              yield* inject(c, { _tag: "None" }).pipe(Effect.map(drop("never fired"))),
              []
            )
          })
      )

      for (const family of Families) {
        it.scoped(`${family}: at every injection point`, () =>
          Effect.gen(function* () {
            const faults = faultsOf(family, yield* countCalls(c))
            assert.isAtLeast(faults.length, 2)
            const problems = yield* Effect.forEach(faults, (fault) => inject(c, fault))
            assert.deepStrictEqual(problems.flat(), [])
          })
        )
      }
    })
  }

  // A lock file that outlives its operation is held by nobody, yet every live process waits for
  // it until it expires. Leaks are reported by where the fault hit: taking or releasing the lock.
  it.scoped("a fault the process survives leaves no lock held once the operation has returned", () =>
    Effect.gen(function* () {
      const found = yield* Effect.forEach(cases, (c) =>
        Effect.flatMap(countCalls(c), (counts) =>
          Effect.forEach(failuresOf(counts), (fault) => leftLocks(c, fault))
        )
      )
      const leaks = found.flat(2)
      const at = (phase: LockPhase) => leaks.flatMap((leak) => (leak.phase === phase ? [leak.problem] : []))
      assert.deepStrictEqual({ take: at("take"), release: at("release") }, { take: [], release: [] })
    })
  )
})

/** A run without a fault has no fault to fire; ignore only that line. */
const drop =
  (text: string) =>
  (problems: ReadonlyArray<string>): ReadonlyArray<string> =>
    problems.filter((problem) => !problem.endsWith(text))
