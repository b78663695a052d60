/**
 * Imports and loads against the store's limits, on the real file system: an import is refused
 * whole when any row breaks a limit, or when the store would grow past its own, and the bytes
 * of the store stay as they were; a store over its limits (written by hand) is reported
 * damaged, never loaded; a fixture that never ends costs no more than the limit to refuse.
 */
import { memoryStoreLayer } from "../../src/store/memoryLayer.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { existsSync, readFileSync, truncateSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { MemoryLimits } from "../../src/domain/memory.js"
import { Host } from "../../src/services/Host.js"
import { MemoryStore } from "../../src/services/MemoryStore.js"
import { buildService, tempDir } from "../support/stores.js"

const lines = (rows: ReadonlyArray<string>) => rows.map((row) => `${row}\n`).join("")
const row = (id: string, text = `note ${id}`) => JSON.stringify({ id, text, source: "test" })

/** A memory store at `<dir>/memory.jsonl` holding `seed`, and a way to import rows into it. */
const setup = (seed: string | undefined) =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const store = join(dir, "memory.jsonl")
    if (seed !== undefined) writeFileSync(store, seed)
    const memory = yield* buildService(
      MemoryStore,
      memoryStoreLayer(store).pipe(Layer.provide(Host.layerTest({})), Layer.provide(nodeContextLayer))
    )
    let fixtures = 0
    const importRows = (rows: ReadonlyArray<string>) => {
      const fixture = join(dir, `fixture-${++fixtures}.jsonl`)
      writeFileSync(fixture, lines(rows))
      return memory.importFile(fixture)
    }
    const bytes = () => (existsSync(store) ? readFileSync(store) : undefined)
    return { store, memory, importRows, bytes }
  })

const secret = "s3cr3t-in-a-row"

describe("memory store limits", () => {
  it.scoped("a row over a limit refuses the whole import, naming its line; nothing is written", () =>
    Effect.gen(function* () {
      const { importRows, bytes } = yield* setup(lines([row("a")]))
      const before = bytes()
      const over = [
        row("t", `${secret} ${"x".repeat(MemoryLimits.textBytes)}`),
        JSON.stringify({ id: "s", text: "t", source: secret.repeat(70) }),
        JSON.stringify({ id: "w", text: secret, source: "s", tags: ["x".repeat(MemoryLimits.rowBytes)] })
      ]
      for (const bad of over) {
        const failed = yield* Effect.flip(importRows([row("b"), row("c"), bad, row("d")]))
        assert.strictEqual(failed._tag, "InvalidInput")
        assert.match(failed.message, /: line 3: /)
        assert.notInclude(failed.message, secret)
        assert.deepStrictEqual(bytes(), before)
      }
    })
  )

  it.scoped("an import that would take the store past 250,000 records is refused whole", () =>
    Effect.gen(function* () {
      const seed = Array.from({ length: MemoryLimits.storeRecords - 2 }, (_, n) => row(`m${n}`, "t"))
      const { memory, importRows, bytes } = yield* setup(lines(seed))
      const before = bytes()
      const failed = yield* Effect.flip(importRows([row("x1"), row("x2"), row("x3")]))
      assert.strictEqual(failed._tag, "InvalidInput")
      assert.include(failed.message, "the store would hold 250,001 records, over the limit of 250,000")
      assert.deepStrictEqual(bytes(), before)
      // Rows it holds already are unchanged, not new: they do not count twice.
      const report = yield* importRows([row("m0", "t"), row("x1"), row("x2")])
      assert.deepStrictEqual(report, { imported: 2, unchanged: 1, total: MemoryLimits.storeRecords })
      assert.deepStrictEqual(
        (yield* memory.search("note x2", 5)).map((hit) => hit.id),
        ["x2"]
      )
    })
  )

  it.scoped(
    "an import that would take the store past 128 MiB is refused whole",
    () =>
      Effect.gen(function* () {
        // 63 rows of 2 MiB: the store is 126 MiB and a little; one more such row would pass 128 MiB.
        // A row's text is 1 MiB at most, so these are mostly quotes, which take two bytes written.
        const big = (id: string, size: number) => {
          const room = size - row(id, "").length
          const quotes = Math.floor(room / 2)
          return row(id, `${'"'.repeat(quotes)}${"x".repeat(room - 2 * quotes)}`)
        }
        const seed = Array.from({ length: 63 }, (_, n) => big(`b${n}`, MemoryLimits.rowBytes))
        const { importRows, bytes } = yield* setup(lines(seed))
        const before = bytes()
        const failed = yield* Effect.flip(importRows([big("last", MemoryLimits.rowBytes)]))
        assert.strictEqual(failed._tag, "InvalidInput")
        assert.include(failed.message, "the store would grow past 134,217,728 bytes (128 MiB)")
        assert.deepStrictEqual(bytes(), before)
        const room = MemoryLimits.storeBytes - (before?.length ?? 0) - 2
        const report = yield* importRows([big("last", room)])
        assert.deepStrictEqual(report, { imported: 1, unchanged: 0, total: 64 })
        assert.strictEqual(bytes()?.length, MemoryLimits.storeBytes - 1)
      }),
    // Writes and reads 128 MiB twice over: about 20 s on a quiet 2-core machine, four times that
    // when the rest of the suite runs beside it.
    180_000
  )

  it.scoped("a fixture that never ends is refused once it passes 128 MiB, and no store is created", () =>
    Effect.gen(function* () {
      const { memory, bytes } = yield* setup(undefined)
      const failed = yield* Effect.flip(memory.importFile("/dev/zero"))
      assert.strictEqual(failed._tag, "InvalidInput")
      assert.strictEqual(
        failed.message,
        "--fixture /dev/zero: is larger than 134,217,728 bytes (128 MiB), the limit of a memory store"
      )
      assert.isUndefined(bytes())
    })
  )

  it.scoped("a store over its limits, written by hand, is reported damaged and never loaded", () =>
    Effect.gen(function* () {
      const { store, memory } = yield* setup(
        lines([row("a"), row("b", "x".repeat(MemoryLimits.textBytes + 1))])
      )
      const damaged = yield* Effect.flip(memory.search("note", 5))
      assert.strictEqual(damaged._tag, "InvalidRecord")
      assert.strictEqual(
        damaged.message,
        `damaged record ${store}: line 2: text: must be at most 1,048,576 bytes (1 MiB) as UTF-8`
      )
      // Grown past 128 MiB (a sparse file: the size is what counts).
      truncateSync(store, MemoryLimits.storeBytes + 1)
      const large = yield* Effect.flip(memory.read("a"))
      assert.strictEqual(large._tag, "InvalidRecord")
      assert.include(large.message, "is larger than 134,217,728 bytes (128 MiB)")
    })
  )
})
