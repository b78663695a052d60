/**
 * What the file store overlaps, and what it must not: a submit stages its record before it holds
 * the task's lock, yet nobody may answer from that record before it is durable, so the lock is
 * held until the directory fsync that makes the rename durable has returned.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import { faultyFileStoreAt, fileStoreAt, tempDir } from "../support/stores.js"

const here = { bootId: "boot-a" }
/** Two processes of one machine, each alive to the other. */
const first = { ...here, pid: 1001, alive: new Set([1002]) }
const second = { ...here, pid: 1002, alive: new Set([1001]) }
const request = { clientRequestId: ClientRequestId.make("once"), payload: { n: 1 } }

describe("file store: overlapped steps", () => {
  it.scopedLive("a submit holds the task's lock until its directory fsync has returned", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store: a, plan } = yield* faultyFileStoreAt(root, first)
      const b = yield* fileStoreAt(root, second)
      // Counting from here, fsync #1 is the staged record's, #2 the directory's after the rename.
      yield* plan.arm({ _tag: "None" })
      const hold = yield* plan.holdAt("sync", 2)
      const submitting = yield* Effect.fork(a.submit(request))
      yield* Deferred.await(hold.reached)
      // The record is in place but not yet durable: a resubmit must not answer from it.
      const early = yield* Effect.fork(b.submit(request))
      const answered = yield* Fiber.join(early).pipe(Effect.timeoutOption("300 millis"))
      assert.isTrue(Option.isNone(answered), "a resubmit answered before the record was durable")
      yield* Deferred.succeed(hold.release, undefined)
      const receipt = yield* Fiber.join(submitting)
      assert.deepStrictEqual(yield* Fiber.join(early), receipt)
    })
  )

  it.scopedLive("a resubmit throws its staged record away and leaves no temp file", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const store = yield* fileStoreAt(root, first)
      const receipt = yield* store.submit(request)
      assert.deepStrictEqual(yield* store.submit(request), receipt)
      const conflict = yield* Effect.flip(store.submit({ ...request, payload: { n: 2 } }))
      assert.strictEqual(conflict._tag, "ConflictError")
      assert.deepStrictEqual(readdirSync(join(root, "tasks")), [`${receipt.task_id}.json`])
    })
  )
})
