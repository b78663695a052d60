/**
 * Random operation sequences with one random fault somewhere in them. The process that meets
 * the fault exits after that operation, and the next process (same boot, the old pid dead)
 * carries on with the rest of the sequence on a healthy disk. A small model records what was acknowledged; at the end a fresh
 * process must find exactly that, no damaged record, and an index that agrees with the records.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Effect, Exit, FastCheck as fc, Option } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { Lease, Receipt } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import type { Fault } from "../support/FaultyFileSystem.js"
import { Operations } from "../support/FaultyFileSystem.js"
import type { Tagged } from "../support/injection.js"
import { crashingProcess, restartViolations, stateOf, untypedErrors } from "../support/restart.js"
import { faultyFileStoreAt, fileStoreAt, tempDir } from "../support/stores.js"

interface Step {
  readonly op: "submit" | "claim" | "complete" | "cancel"
  readonly task: number
}

const step: fc.Arbitrary<Step> = fc.record({
  op: fc.constantFrom<Step["op"]>("submit", "claim", "complete", "cancel"),
  task: fc.integer({ min: 0, max: 2 })
})
const nth = fc.integer({ min: 1, max: 6 })
const fault: fc.Arbitrary<Fault> = fc.oneof(
  fc
    .tuple(fc.constantFrom(...Operations), nth, fc.constantFrom<"ENOSPC" | "EIO">("ENOSPC", "EIO"))
    .map(([operation, n, errno]): Fault => ({ _tag: "Fail", operation, nth: n, errno })),
  fc.tuple(nth, fc.boolean()).map(([n, crash]): Fault => ({ _tag: "Tear", nth: n, crash })),
  fc.integer({ min: 0, max: 40 }).map((mutations): Fault => ({ _tag: "CrashAfter", mutations }))
)

/** What the sequence has acknowledged: receipts, leases, and the state each task must be in. */
interface Model {
  readonly receipts: Map<number, Receipt>
  readonly leases: Map<number, Lease>
  /** Only states an acknowledged operation made certain; a failure makes the task's state unknown. */
  readonly states: Map<number, string>
}

const perform = (store: TaskStoreShape, { op, task }: Step, model: Model): Effect.Effect<void, Tagged> => {
  const receipt = model.receipts.get(task)
  const lease = model.leases.get(task)
  const known = (state: string | undefined) =>
    Effect.sync(() => (state === undefined ? model.states.delete(task) : model.states.set(task, state)))
  if (op === "submit") {
    const payload = { task }
    return Effect.flatMap(store.submit({ clientRequestId: ClientRequestId.make(`t${task}`), payload }), (r) =>
      Effect.zipRight(
        Effect.sync(() => model.receipts.set(task, r)),
        receipt === undefined && !model.states.has(task) ? known("queued@0") : Effect.void
      )
    )
  }
  if (receipt === undefined) return Effect.void
  if (op === "claim")
    return Effect.flatMap(store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 }), (claimed) =>
      Option.match(claimed, {
        onNone: () => known(undefined),
        onSome: ({ lease: l }) =>
          Effect.zipRight(
            Effect.sync(() => model.leases.set(task, l)),
            known(`running@${l.attempt}`)
          )
      })
    )
  if (op === "cancel")
    return Effect.flatMap(store.cancel(receipt.task_id, receipt.payload_sha256), (outcome) =>
      known(outcome.cancelled ? "cancelled@0" : undefined)
    )
  if (lease === undefined) return Effect.void
  return Effect.zipRight(store.complete(receipt.task_id, lease, { task }), known(`complete@${lease.attempt}`))
}

const runSequence = (steps: ReadonlyArray<Step>, injected: Fault) =>
  Effect.scoped(
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store: first, plan } = yield* faultyFileStoreAt(root, crashingProcess)
      yield* plan.arm(injected)
      const model: Model = { receipts: new Map(), leases: new Map(), states: new Map() }
      const problems: Array<string> = []
      let store = first
      let faulty = true
      let pid = crashingProcess.pid ?? 1001
      for (const s of steps) {
        const exit = yield* Effect.exit(perform(store, s, model))
        problems.push(...untypedErrors(exit, ["StorageError", "StaleAttempt"]))
        const storageFailed =
          Exit.isFailure(exit) &&
          Cause.failures(exit.cause).pipe(Chunk.some((e) => e._tag === "StorageError"))
        if (storageFailed && !faulty) problems.push(`${s.op} t${s.task} failed on a healthy disk`)
        if (storageFailed) model.states.delete(s.task)
        // The process that met the fault exits after that operation; the next one carries on.
        if (faulty && (storageFailed || (yield* plan.fired))) {
          faulty = false
          pid += 1
          store = yield* fileStoreAt(root, { pid, bootId: "boot-a", alive: new Set([pid]) })
        }
      }
      const last = yield* fileStoreAt(root, { pid: pid + 1, bootId: "boot-a", alive: new Set([pid + 1]) })
      problems.push(...(yield* restartViolations(last, root, [...model.receipts.values()])))
      for (const [task, state] of model.states) {
        const found = yield* stateOf(last, `t${task}`)
        if (found !== state) problems.push(`t${task} is ${found}, acknowledged ${state}`)
      }
      return problems
    })
  )

describe("file store: random sequences with one fault", () => {
  it.scoped.prop(
    "acknowledged work survives, records stay whole, the index agrees",
    [fc.array(step, { minLength: 2, maxLength: 10 }), fault],
    ([steps, injected]) =>
      Effect.map(runSequence(steps, injected), (problems) => assert.deepStrictEqual(problems, [])),
    { fastCheck: { numRuns: 60, seed: 20240601 } }
  )
})
