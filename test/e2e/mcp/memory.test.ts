/** relaykeep-memory over MCP: search (AND of terms, case-insensitive, ranked), limits, read as imported. */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { MemoryHit } from "../../../src/domain/memory.js"
import type { Session } from "../../support/mcpStdio.js"
import { callError, callOk, useMcpTest } from "../../support/mcpStdio.js"
import { cliJson, relaykeep, repo, writeLines } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

const SearchResult = Schema.Struct({ hits: Schema.Array(MemoryHit) })
const ReadResult = Schema.Struct({ record: Schema.Unknown })
const ImportReport = Schema.Struct({ imported: Schema.Int, unchanged: Schema.Int, total: Schema.Int })

/**
 * A store whose answers are known. Occurrences of "lighthouse" + "tide":
 * m1 1+1=2, m2 1+3=4, m3 2+1=3, m4 0+1 (no lighthouse), m5 1+0 (no tide), m6 1+1=2.
 * So "lighthouse tide" ranks m2, m3, then m1 before m6 (a tie, file order).
 * Keys come in different orders on purpose: read must keep each record's own order.
 */
const crafted = [
  '{"id":"m1","text":"The lighthouse keeper logs the tide.","source":"notes/coast.md","tags":["coast"]}',
  '{"source":"notes/harbor.md","id":"m2","text":"Tide tables: tide at dawn, TIDE at dusk, LightHouse dark.","created_at":"2026-01-02T03:04:05Z"}',
  '{"id":"m3","text":"A lighthouse, a lighthouse and a tide.","source":"notes/coast.md"}',
  '{"id":"m4","text":"Only the tide here.","source":"notes/misc.md"}',
  '{"tags":[],"text":"Lighthouse without water.","id":"m5","source":"notes/misc.md"}',
  '{"id":"m6","text":"tide, then lighthouse","source":"notes/misc.md","created_at":"2026-02-03T00:00:00Z","tags":["a","b"]}'
]
/** 22 records matching "filler": more than the default limit (5) and the maximum (20). */
const fillers = Array.from(
  { length: 22 },
  (_, i) => `{"id":"f${String(i + 1).padStart(2, "0")}","text":"filler record ${i + 1}","source":"gen"}`
)

/** Import a fixture file into a new store through the CLI, then serve that store. */
const serveFixture = async (fixture: string, count: number): Promise<Session> => {
  const dir = mcp.tempDir()
  const store = path.join(dir, "memory.jsonl")
  const report = cliJson(
    ImportReport,
    await relaykeep(["memory", "import", "--store", store, "--fixture", fixture])
  )
  assert.deepStrictEqual(report, { imported: count, unchanged: 0, total: count })
  return mcp.memory(store, path.join(dir, "root"))
}

const serve = (lines: ReadonlyArray<string>): Promise<Session> => {
  const fixture = path.join(mcp.tempDir(), "fixture.jsonl")
  writeLines(fixture, lines)
  return serveFixture(fixture, lines.length)
}

const search = async (session: Session, args: Record<string, unknown>) =>
  (await callOk(session, SearchResult, "search", args)).hits

/** The id of a JSONL line, and the line as compact JSON (same keys, same order). */
const idOf = (line: string) =>
  Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ id: Schema.String })))(line).id
const compact = (line: string) => JSON.stringify(Schema.decodeUnknownSync(Schema.parseJson())(line))
const TextOf = Schema.parseJson(Schema.Struct({ text: Schema.String }))

/** The search rule, restated independently: every term a substring; most occurrences, then file order. */
const expectedIds = (lines: ReadonlyArray<string>, query: string, limit: number) => {
  const terms = query
    .toLowerCase()
    .split(/\s+/)
    .filter((term) => term !== "")
  const count = (text: string, term: string) => text.split(term).length - 1
  return lines
    .map((line, index) => {
      const text = Schema.decodeUnknownSync(TextOf)(line).text.toLowerCase()
      const counts = terms.map((term) => count(text, term))
      return {
        id: idOf(line),
        index,
        matches: counts.every((n) => n > 0),
        score: counts.reduce((a, b) => a + b, 0)
      }
    })
    .filter((row) => row.matches)
    .sort((a, b) => b.score - a.score || a.index - b.index)
    .slice(0, limit)
    .map((row) => row.id)
}

const ids = (hits: ReadonlyArray<MemoryHit>) => hits.map((hit) => hit.id)

describe("relaykeep-memory", () => {
  it("search: every term must match; ranked by occurrences, then file order; case-insensitive", async () => {
    const session = await serve([...crafted, ...fillers])
    const hits = await search(session, { query: "lighthouse tide" })
    assert.deepStrictEqual(
      hits.map((hit) => [hit.id, hit.score, hit.source]),
      [
        ["m2", 4, "notes/harbor.md"],
        ["m3", 3, "notes/coast.md"],
        ["m1", 2, "notes/coast.md"],
        ["m6", 2, "notes/misc.md"]
      ]
    )
    for (const hit of hits) assert.match(hit.snippet, /lighthouse/i, `${hit.id} snippet shows the match`)
    assert.deepStrictEqual(ids(await search(session, { query: "TIDE   LIGHTHOUSE" })), [
      "m2",
      "m3",
      "m1",
      "m6"
    ])
    assert.deepStrictEqual(ids(await search(session, { query: "tide" })), ["m2", "m1", "m3", "m4", "m6"])
    assert.deepStrictEqual(ids(await search(session, { query: "lighthouse water" })), ["m5"])
    assert.deepStrictEqual(ids(await search(session, { query: "lighthouse zebra" })), [])
    // Substrings count: "house" is inside "lighthouse" (and "LightHouse").
    assert.deepStrictEqual(ids(await search(session, { query: "HOUSE dark" })), ["m2"])
  })

  it("search limit: 5 by default, up to 20; 21, 0 and an empty query are InvalidArguments", async () => {
    const session = await serve([...crafted, ...fillers])
    assert.deepStrictEqual(ids(await search(session, { query: "filler" })), [
      "f01",
      "f02",
      "f03",
      "f04",
      "f05"
    ])
    const twenty = await search(session, { query: "filler", limit: 20 })
    assert.deepStrictEqual(
      ids(twenty),
      fillers.slice(0, 20).map((_, i) => `f${String(i + 1).padStart(2, "0")}`)
    )
    assert.deepStrictEqual(ids(await search(session, { query: "filler", limit: 1 })), ["f01"])
    for (const args of [
      { query: "filler", limit: 21 },
      { query: "filler", limit: 0 },
      { query: "filler", limit: 2.5 }
    ])
      assert.include(await callError(session, "InvalidArguments", "search", args), "limit")
    for (const query of ["", "   ", "\t\n"])
      assert.include(await callError(session, "InvalidArguments", "search", { query }), "query")
    assert.include(await callError(session, "InvalidArguments", "search", {}), "query")
  })

  it("read returns each record exactly as imported, key order included; an unknown id is UnknownMemory", async () => {
    const session = await serve(crafted)
    for (const line of crafted) {
      const { record } = await callOk(session, ReadResult, "read", { id: idOf(line) })
      assert.strictEqual(JSON.stringify(record), line, idOf(line))
    }
    const message = await callError(session, "UnknownMemory", "read", { id: "m7" })
    // The field, not its value: the id is the caller's input.
    assert.include(message, "id: no memory record has this id")
    assert.include(await callError(session, "InvalidArguments", "read", { id: "" }), "id")
    assert.include(await callError(session, "InvalidArguments", "read", { id: "m1", extra: 1 }), "extra")
  })

  const synthetic = path.join(repo, "fixtures", "synthetic_memory.jsonl")
  it.runIf(fs.existsSync(synthetic))(
    "fixtures/synthetic_memory.jsonl imports, and reads back line for line",
    async () => {
      const lines = fs
        .readFileSync(synthetic, "utf8")
        .split("\n")
        .filter((line) => line.trim() !== "")
      const session = await serveFixture(synthetic, lines.length)
      for (const line of lines) {
        const { record } = await callOk(session, ReadResult, "read", { id: idOf(line) })
        assert.strictEqual(JSON.stringify(record), compact(line), idOf(line))
      }
      for (const query of ["lumen", "the", "deploy approval", "SEARCH lumen"]) {
        const hits = await search(session, { query, limit: 20 })
        assert.deepStrictEqual(ids(hits), expectedIds(lines, query, 20), query)
      }
    }
  )
})
