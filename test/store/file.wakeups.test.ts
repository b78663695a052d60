/**
 * The file store's wake-ups: a watching worker hears of a submission (and of a task queued
 * again) through a file-system watch on the queued index, not only by polling.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Stream } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { fileStoreAt, tempDir } from "../support/stores.js"

const id = (text: string) => ClientRequestId.make(text)

/** Listen, let the watch start, run `cause`, and tell whether a wake-up came within 10 s. */
const wokenBy = <E>(store: TaskStoreShape, cause: Effect.Effect<unknown, E>) =>
  Effect.gen(function* () {
    const heard = yield* store.wakeups.pipe(Stream.runHead, Effect.fork)
    yield* Effect.sleep(Duration.millis(200))
    yield* cause
    const woke = yield* Fiber.join(heard).pipe(Effect.timeoutOption(Duration.seconds(10)))
    // Some(Some(_)): a wake-up arrived (an ended stream would give Some(None)).
    return Option.isSome(woke) && Option.isSome(woke.value)
  })

describe("file store wake-ups", () => {
  it.scopedLive("a submission wakes a listener", () =>
    Effect.gen(function* () {
      const store = yield* fileStoreAt(yield* tempDir)
      yield* store.check
      assert.isTrue(yield* wokenBy(store, store.submit({ clientRequestId: id("a"), payload: {} })))
    })
  )

  it.scopedLive("a retry queued again wakes a listener", () =>
    Effect.gen(function* () {
      const store = yield* fileStoreAt(yield* tempDir)
      const receipt = yield* store.submit({ clientRequestId: id("r"), payload: {} })
      const retry = { max_attempts: 2, backoff_initial_ms: 0, backoff_max_ms: 0 }
      const claimed = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000, retry })
      if (Option.isNone(claimed)) return assert.fail("not claimed")
      const error = { tag: "ProviderTimeout", message: "slow", retryable: true }
      assert.isTrue(yield* wokenBy(store, store.fail(receipt.task_id, claimed.value.lease, error)))
    })
  )
})
