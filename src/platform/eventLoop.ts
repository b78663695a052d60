/**
 * Letting the event loop deliver what is already waiting. Synchronous file calls (nodeFiles.ts)
 * let a fiber run from a timer to its end without the loop turning once; a decision that depends
 * on I/O that has already happened (a child process that exited, its output in the pipe) must
 * first let the loop deliver it.
 */
import { Effect } from "effect"

/** One turn of Node's event loop: I/O already pending is delivered before this completes. */
export const nextTurn: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** Up to `turns` turns of the event loop, fewer once `settled` holds. */
export const turnsUntil = (settled: Effect.Effect<boolean>, turns: number): Effect.Effect<void> =>
  Effect.gen(function* () {
    for (let turn = 0; turn < turns && !(yield* settled); turn++) yield* nextTurn
  })
