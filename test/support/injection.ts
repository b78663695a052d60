/**
 * Run one store operation under one injected fault, then "restart" on the same root as the next
 * process of the same boot, and collect every violation of the file store's invariants.
 */
import { Effect, Exit } from "effect"
import type { Receipt } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import type { Counts, FailFault, Fault } from "./FaultyFileSystem.js"
import { Operations } from "./FaultyFileSystem.js"
import {
  crashingProcess,
  lockFiles,
  nextProcess,
  restartViolations,
  stateOf,
  untypedErrors
} from "./restart.js"
import { faultyFileStoreAt, fileStoreAt, tempDir } from "./stores.js"

export interface Tagged {
  readonly _tag: string
}

/** An operation on a store brought to its "before" state; it returns the receipts it acknowledges. */
export interface Scenario {
  readonly acknowledged: ReadonlyArray<Receipt>
  readonly operation: (store: TaskStoreShape) => Effect.Effect<ReadonlyArray<Receipt>, Tagged>
}

export interface Case {
  readonly name: string
  readonly prepare: (store: TaskStoreShape) => Effect.Effect<Scenario, Tagged>
  /** The target task is submitted under this request id. */
  readonly target: string
  /** Its state (`state@attempt`) before and after the operation. */
  readonly before: string
  readonly after: string
}

export const describeFault = (fault: Fault): string => {
  switch (fault._tag) {
    case "None":
      return "no fault"
    case "Fail":
      return `${fault.operation} #${fault.nth} fails (${fault.errno})`
    case "Tear":
      return `write #${fault.nth} torn${fault.crash ? ", then crash" : ""}`
    case "CrashAfter":
      return `crash after mutation #${fault.mutations}`
  }
}

/** Run the operation once without faults, to learn how many calls of each kind it makes. */
export const countCalls = (c: Case) =>
  Effect.scoped(
    Effect.gen(function* () {
      const { store, plan } = yield* faultyFileStoreAt(yield* tempDir, crashingProcess)
      const scenario = yield* c.prepare(store)
      yield* plan.arm({ _tag: "None" })
      yield* scenario.operation(store)
      return yield* plan.counts
    })
  )

const range = (n: number, from = 1) => Array.from({ length: n - from + 1 }, (_, i) => i + from)

export type Family = "fail" | "tear" | "crash"
export const Families: ReadonlyArray<Family> = ["fail", "tear", "crash"]

/** Every fault of one family at every index the counts allow. */
export const faultsOf = (family: Family, counts: Counts): ReadonlyArray<Fault> => {
  switch (family) {
    case "fail":
      return Operations.flatMap((operation) =>
        range(counts[operation]).map((nth): Fault => ({
          _tag: "Fail",
          operation,
          nth,
          errno: operation === "sync" ? "EIO" : "ENOSPC"
        }))
      )
    case "tear":
      return range(counts.write).flatMap((nth): ReadonlyArray<Fault> => [
        { _tag: "Tear", nth, crash: false },
        { _tag: "Tear", nth, crash: true }
      ])
    case "crash":
      return range(counts.mutations, 0).map((mutations): Fault => ({ _tag: "CrashAfter", mutations }))
  }
}

/** One injection: fault, restart, check, redo; returns the violations, each prefixed by the fault. */
export const inject = (c: Case, fault: Fault) =>
  Effect.scoped(
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store, plan } = yield* faultyFileStoreAt(root, crashingProcess)
      const scenario = yield* c.prepare(store)
      yield* plan.arm(fault)
      const exit = yield* Effect.exit(scenario.operation(store))
      const counts = yield* plan.counts
      const problems: Array<string> = [...untypedErrors(exit, ["StorageError"])]
      if (!(yield* plan.fired)) problems.push("the fault never fired")
      if (fault._tag === "Fail" && fault.operation === "sync") {
        if (Exit.isSuccess(exit)) problems.push("an fsync failed, yet the operation succeeded")
        if (counts.sync !== fault.nth) problems.push(`fsync was retried: ${counts.sync} calls`)
      }

      const restarted = yield* fileStoreAt(root, nextProcess)
      const acknowledged = Exit.isSuccess(exit) ? exit.value : []
      problems.push(
        ...(yield* restartViolations(restarted, root, [...scenario.acknowledged, ...acknowledged]))
      )
      const state = yield* stateOf(restarted, c.target)
      if (state !== c.before && state !== c.after) problems.push(`the target is ${state}`)
      if (Exit.isSuccess(exit) && state !== c.after) problems.push(`acknowledged, yet the target is ${state}`)

      // The next process can finish the job: redoing the operation converges on "after".
      const redo = yield* Effect.exit(scenario.operation(restarted))
      problems.push(...untypedErrors(redo, ["StaleAttempt"]).map((p) => `redo ${p}`))
      if (
        Exit.isSuccess(redo) &&
        JSON.stringify(redo.value) !== JSON.stringify(acknowledged) &&
        Exit.isSuccess(exit)
      )
        problems.push("redo returned a different receipt")
      const final = yield* stateOf(restarted, c.target)
      if (final !== c.after) problems.push(`after redo the target is ${final}`)
      return problems.map((problem) => `${c.name}, ${describeFault(fault)}: ${problem}`)
    })
  )

/** Every Fail fault the counts allow. */
export const failuresOf = (counts: Counts): ReadonlyArray<FailFault> =>
  faultsOf("fail", counts).filter((fault): fault is FailFault => fault._tag === "Fail")

export type LockPhase = "take" | "release"

/**
 * Run the operation under a fault that the process survives, and report a lock file left in
 * place once it returned: nobody holds it, yet every live process on this host waits for it
 * until it expires. Each report says whether the fault hit while the lock was being taken or
 * released. A failed unlink of the lock file itself is the one fault that may leave it.
 */
export const leftLocks = (c: Case, fault: FailFault) =>
  Effect.scoped(
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store, plan } = yield* faultyFileStoreAt(root, crashingProcess)
      const scenario = yield* c.prepare(store)
      yield* plan.arm(fault)
      yield* Effect.exit(scenario.operation(store))
      const journal = yield* plan.journal
      const failedAt = journal.flatMap((e, i) => (e.kind === fault.operation ? [i] : []))[fault.nth - 1] ?? -1
      const failed = journal[failedAt]
      const firstBody = journal.findIndex((e) => !e.path.startsWith(`${root}/locks/`))
      const phase: LockPhase = firstBody === -1 || failedAt < firstBody ? "take" : "release"
      const left = yield* lockFiles(root)
      return left
        .filter((name) => !(fault.operation === "remove" && failed?.path === `${root}/locks/${name}`))
        .map((name) => ({ phase, problem: `${c.name}, ${describeFault(fault)}: lock ${name} left held` }))
    })
  )
