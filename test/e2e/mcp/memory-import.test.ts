/** `relaykeep memory import`: all rows valid or nothing changes; identical rows are idempotent. */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as path from "node:path"
import { useMcpTest } from "../../support/mcpStdio.js"
import { bytesOf, cliFailure, cliJson, relaykeep, writeLines } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

const ImportReport = Schema.Struct({ imported: Schema.Int, unchanged: Schema.Int, total: Schema.Int })

const base = [
  '{"id":"a","text":"first note","source":"notes/a.md","tags":["x"]}',
  '{"text":"second note","id":"b","source":"notes/b.md","created_at":"2026-01-01T00:00:00Z"}'
]
const fresh = '{"id":"c","text":"a new note","source":"notes/c.md"}'

/**
 * A directory with a store, and a way to import a fixture made of `lines`. With `seed`, the
 * store starts as `base`, written directly: a store is just JSONL (the CLI's own import of
 * `base` is exercised by the idempotency test).
 */
const setup = (seed: boolean) => {
  const dir = mcp.tempDir()
  const store = path.join(dir, "memory.jsonl")
  if (seed) writeLines(store, base)
  let fixtures = 0
  const importLines = (lines: ReadonlyArray<string>) => {
    const fixture = path.join(dir, `fixture-${++fixtures}.jsonl`)
    writeLines(fixture, lines)
    return relaykeep(["memory", "import", "--store", store, "--fixture", fixture])
  }
  return { store, importLines }
}

const invalidRows: ReadonlyArray<readonly [string, string]> = [
  ["an extra key", '{"id":"n","text":"x","source":"s","priority":1}'],
  ["an empty text", '{"id":"n","text":"","source":"s"}'],
  ["no source", '{"id":"n","text":"x"}'],
  ["bad JSON", '{"id":"n","text":'],
  ["tags that are not strings", '{"id":"n","text":"x","source":"s","tags":[1]}'],
  ["an id over 200 characters", `{"id":"${"i".repeat(201)}","text":"x","source":"s"}`],
  ["an empty id", '{"id":"","text":"x","source":"s"}'],
  ["not an object", '["id","text","source"]'],
  ["a lone surrogate in its text", '{"id":"n","text":"half \\ud800 a pair","source":"s"}'],
  ["a lone surrogate in a tag", '{"id":"n","text":"x","source":"s","tags":["\\udc00"]}']
]

describe("relaykeep memory import", () => {
  it.each(invalidRows)(
    "a fixture with %s is rejected whole and the store's bytes are unchanged",
    async (_, bad) => {
      const { store, importLines } = setup(true)
      const before = bytesOf(store)
      const line = cliFailure(
        await importLines([fresh, bad, '{"id":"d","text":"y","source":"s"}']),
        2,
        "InvalidInput"
      )
      assert.include(line, "line 2", "the bad row is named")
      assert.deepStrictEqual(bytesOf(store), before)
    }
  )

  it("an invalid fixture does not create a store that did not exist", async () => {
    const { store, importLines } = setup(false)
    cliFailure(await importLines([fresh, '{"id":"n","text":""}']), 2, "InvalidInput")
    assert.isNull(bytesOf(store))
  })

  it("re-importing identical rows is accepted and imports nothing; new rows are appended", async () => {
    const { store, importLines } = setup(false)
    assert.deepStrictEqual(cliJson(ImportReport, await importLines(base)), {
      imported: 2,
      unchanged: 0,
      total: 2
    })
    const before = bytesOf(store)
    assert.strictEqual(before?.toString("utf8"), base.map((line) => `${line}\n`).join(""))
    assert.deepStrictEqual(cliJson(ImportReport, await importLines(base)), {
      imported: 0,
      unchanged: 2,
      total: 2
    })
    assert.deepStrictEqual(bytesOf(store), before)
    assert.deepStrictEqual(cliJson(ImportReport, await importLines([...base, fresh])), {
      imported: 1,
      unchanged: 2,
      total: 3
    })
    assert.strictEqual(bytesOf(store)?.toString("utf8"), [...base, fresh].map((line) => `${line}\n`).join(""))
  })

  it("an existing id with different content is rejected, with the rows before it", async () => {
    const { store, importLines } = setup(true)
    const before = bytesOf(store)
    const changed = '{"id":"b","text":"second note, edited","source":"notes/b.md"}'
    const line = cliFailure(await importLines([fresh, changed]), 2, "InvalidInput")
    // Which row, not its id: the id is the fixture's text, which messages never quote.
    assert.include(line, "row 2: its id already exists with different content")
    assert.deepStrictEqual(bytesOf(store), before)
    // The same id twice in one fixture, with different content, is the same conflict.
    const twice = cliFailure(
      await importLines([fresh, '{"id":"c","text":"another","source":"s"}']),
      2,
      "InvalidInput"
    )
    assert.include(twice, "its id already exists with different content")
    assert.deepStrictEqual(bytesOf(store), before)
  })
})
