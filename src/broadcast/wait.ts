/** Waiting for any of some tasks to change: the store's signal when it comes, a poll when it does not. */
import type { Scope } from "effect"
import { Duration, Effect, Queue, Stream } from "effect"
import type { TaskId } from "../domain/ids.js"
import type { TaskStoreShape } from "../services/TaskStore.js"

/** How often a waiting reader looks again when no change signal came. */
export const PollMillis = 1000

/**
 * Within a scope, listen for changes of any of `taskIds` (a file watch, a NOTIFY); the effect
 * returned waits until the next one, or at most `millis`, whichever comes first.
 */
export const changesOf = (
  store: TaskStoreShape,
  taskIds: ReadonlyArray<TaskId>
): Effect.Effect<(millis: number) => Effect.Effect<void>, never, Scope.Scope> =>
  Effect.gen(function* () {
    const watched = new Set<string>(taskIds)
    const changed = yield* Queue.sliding<void>(1)
    yield* store.changes.pipe(
      Stream.filter((id) => watched.has(id)),
      Stream.runForEach(() => Queue.offer(changed, undefined)),
      Effect.forkScoped
    )
    return (millis: number) =>
      Queue.take(changed).pipe(Effect.timeout(Duration.millis(Math.max(0, millis))), Effect.ignore)
  })
