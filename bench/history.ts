/**
 * How the history benchmarks fill a root: tasks submitted, claimed by id and completed with the
 * echo provider's result through the store's own API, as a worker finishes them.
 */
import { Effect, Option } from "effect"
import type { TaskId } from "../src/index.js"
import { ClientRequestId, DefaultLeaseMillis, TaskStore } from "../src/index.js"

/** Submissions and completions in flight while a root is filled (setup only). */
export const FillConcurrency = 16
export const BenchWorkerId = "bench-worker"

export const echoPayload = (label: string) => ({
  prompt: `${label}: the quick brown fox jumps over the lazy dog`
})

/** Submit `count` tasks labelled `label`, `tick` after each; returns their ids. */
export const submitTasks = (label: string, count: number, tick: Effect.Effect<void> = Effect.void) =>
  Effect.flatMap(TaskStore, (store) =>
    Effect.forEach(
      Array.from({ length: count }, (_, n) => n),
      (n) =>
        Effect.map(
          store.submit({
            clientRequestId: ClientRequestId.make(`${label}-${n}`),
            payload: echoPayload(`${label}/${n}`)
          }),
          (receipt) => receipt.task_id
        ).pipe(Effect.tap(() => tick)),
      { concurrency: FillConcurrency }
    )
  )

/** Finish tasks the way a worker does: claim, then complete with echo's result; `tick` after each. */
export const finishTasks = (ids: ReadonlyArray<TaskId>, tick: Effect.Effect<void> = Effect.void) =>
  Effect.flatMap(TaskStore, (store) =>
    Effect.forEach(
      ids,
      (taskId) =>
        Effect.gen(function* () {
          const claimed = yield* store.claim(taskId, {
            workerId: BenchWorkerId,
            leaseMillis: DefaultLeaseMillis
          })
          if (Option.isNone(claimed)) return yield* Effect.dieMessage(`could not claim ${taskId}`)
          const { record, lease } = claimed.value
          yield* store.complete(taskId, lease, { echo: record.payload, provider: "echo" })
          yield* tick
        }),
      { concurrency: FillConcurrency, discard: true }
    )
  )
