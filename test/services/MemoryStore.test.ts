/**
 * A long search shares the event loop: a cheap call made while it runs is answered first, and a
 * timeout stops it part-way instead of waiting for its end. Real clock, real files; the search
 * is slow by construction (support/heavyMemory.ts), never timed against a threshold.
 */
import { memoryStoreLayer } from "../../src/store/memoryLayer.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Option } from "effect"
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Host } from "../../src/services/Host.js"
import { MemoryStore } from "../../src/services/MemoryStore.js"
import { heavyQuery, heavyRows, heavyTopIds } from "../support/heavyMemory.js"
import { buildService, tempDir } from "../support/stores.js"

const heavyStore = Effect.gen(function* () {
  const store = join(yield* tempDir, "memory.jsonl")
  writeFileSync(store, heavyRows().join("\n"))
  const memory = yield* buildService(
    MemoryStore,
    memoryStoreLayer(store).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
  )
  // Loaded (and indexed) before anything is compared.
  yield* memory.read("light")
  return memory
})

describe("MemoryStore.search under load", () => {
  it.live(
    "a read made while a heavy search runs is answered before the search",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const memory = yield* heavyStore
          const order: Array<string> = []
          const search = yield* Effect.fork(
            Effect.tap(memory.search(heavyQuery, 5), () => Effect.sync(() => order.push("search")))
          )
          // Well inside the search (a second or more); a search that kept the event loop to
          // itself would not even let this sleep end before it was done.
          yield* Effect.sleep("100 millis")
          const record = yield* memory.read("light")
          order.push("read")
          const hits = yield* Fiber.join(search)
          assert.deepStrictEqual(order, ["read", "search"])
          assert.deepStrictEqual(record, { id: "light", text: "a small note", source: "test" })
          assert.deepStrictEqual(
            hits.map((hit) => hit.id),
            heavyTopIds
          )
        })
      ),
    120_000
  )

  it.live(
    "a timeout stops a heavy search part-way: it ends long before the whole search would",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const memory = yield* heavyStore
          const whole = yield* Effect.timed(memory.search(heavyQuery, 5))
          const start = yield* Clock.currentTimeMillis
          const cut = yield* Effect.timeoutOption(memory.search(heavyQuery, 5), "20 millis")
          const cutMillis = (yield* Clock.currentTimeMillis) - start
          assert.isTrue(Option.isNone(cut), "the search was stopped")
          // Relative, not a threshold: the stopped search did a small part of the work.
          assert.isBelow(cutMillis, Duration.toMillis(whole[0]) / 2)
        })
      ),
    120_000
  )

  it.effect("a query over the limits is InvalidInput naming the query, and repeats count once", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const memory = yield* heavyStore
        const failed = yield* Effect.flip(
          memory.search(Array.from({ length: 33 }, (_, n) => `t${n}`).join(" "), 5)
        )
        assert.strictEqual(failed._tag, "InvalidInput")
        assert.strictEqual(failed.message, "query: must have at most 32 distinct terms")
        const once = yield* memory.search("small note", 5)
        assert.deepStrictEqual(yield* memory.search("SMALL small note Note small", 5), once)
        assert.deepStrictEqual(
          once.map((hit) => [hit.id, hit.score]),
          [["light", 2]]
        )
      })
    )
  )
})
