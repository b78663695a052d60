/** A memory-store append that fails half-way leaves the store as it was, readable. */
import { memoryStoreLayer } from "../../src/store/memoryLayer.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import * as NodePath from "@effect/platform-node/NodePath"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Host } from "../../src/services/Host.js"
import { MemoryStore } from "../../src/services/MemoryStore.js"
import type { Fault } from "../support/FaultyFileSystem.js"
import { FaultPlan, layer as faultyFileSystem } from "../support/FaultyFileSystem.js"
import { buildService, tempDir } from "../support/stores.js"

const existing = '{"id":"a","text":"alpha note","source":"s"}\n'
const incoming = '{"id":"b","text":"beta note","source":"s"}\n{"id":"c","text":"gamma note","source":"s"}\n'

// Writes of one import: the lock file (1), the append (2), the release guard (3); the append's
// fsync is the only fsync.
const faults: ReadonlyArray<readonly [string, Fault]> = [
  ["a torn append", { _tag: "Tear", nth: 2, crash: false }],
  ["a failed fsync of the append", { _tag: "Fail", operation: "sync", nth: 1, errno: "EIO" }]
]

describe("memory store appends under faults", () => {
  for (const [name, fault] of faults) {
    it.scoped(`${name} fails the import and leaves the store's bytes as they were`, () =>
      Effect.gen(function* () {
        const dir = yield* tempDir
        const store = join(dir, "memory.jsonl")
        const fixture = join(dir, "fixture.jsonl")
        writeFileSync(store, existing)
        writeFileSync(fixture, incoming)
        const context = yield* Layer.build(faultyFileSystem)
        const memory = yield* buildService(
          MemoryStore,
          memoryStoreLayer(store).pipe(
            Layer.provide(Host.layerTest({})),
            Layer.provide(NodePath.layer),
            Layer.provide(Layer.succeedContext(context))
          )
        )
        yield* Context.get(context, FaultPlan).arm(fault)
        const failed = yield* Effect.flip(memory.importFile(fixture))
        assert.strictEqual(failed._tag, "StorageError")
        assert.strictEqual(readFileSync(store, "utf8"), existing)
        // And a fresh reader on the real file system still reads it.
        const reader = yield* buildService(
          MemoryStore,
          memoryStoreLayer(store).pipe(Layer.provide(Host.layerTest({})), Layer.provide(nodeContextLayer))
        )
        assert.deepStrictEqual(
          (yield* reader.search("note", 5)).map((hit) => hit.id),
          ["a"]
        )
      })
    )
  }
})
