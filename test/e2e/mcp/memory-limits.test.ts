/**
 * The memory server's limits, end to end through the built binaries: an import refuses a row
 * one byte over a limit (naming the line, changing nothing), a record exactly at the limits
 * imports and comes back whole through `read` and `search` over stdio, a heavy search does not
 * hold up a cheap call, and a search past its time bound is answered with ToolTimeout while the
 * server keeps serving. Run `npm run build` first.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { MemoryHit, MemoryLimits, utf8Length } from "../../../src/domain/memory.js"
import { AuditEntry } from "../../../src/domain/audit.js"
import { heavyQuery, heavyRows, heavyTopIds } from "../../support/heavyMemory.js"
import type { Session } from "../../support/mcpStdio.js"
import { call, callError, callOk, errorResult, okResult, useMcpTest } from "../../support/mcpStdio.js"
import { bytesOf, cliFailure, cliJson, memoryBin, relaykeep, writeLines } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

const ImportReport = Schema.Struct({ imported: Schema.Int, unchanged: Schema.Int, total: Schema.Int })
const SearchResult = Schema.Struct({ hits: Schema.Array(MemoryHit) })
const ReadResult = Schema.Struct({ record: Schema.Unknown })

const secret = "s3cr3t-memory-row"

/**
 * A row whose text is exactly `textBytes` of UTF-8 and whose line is exactly `rowBytes`: the
 * text is mostly quotes, which take two bytes written (and four once a `read` answer embeds the
 * record as escaped text: the largest answer a row of that size can make).
 */
const rowAt = (id: string, textBytes: number, rowBytes: number) => {
  const shell = JSON.stringify({ id, text: secret, source: "limits" }).length
  const quotes = rowBytes - shell - textBytes + secret.length
  const text = `${secret}${'"'.repeat(quotes)}${"x".repeat(textBytes - secret.length - quotes)}`
  const line = JSON.stringify({ id, text, source: "limits" })
  assert.strictEqual(utf8Length(text), textBytes)
  assert.strictEqual(utf8Length(line), rowBytes)
  return { line, text }
}

const importInto = async (store: string, lines: ReadonlyArray<string>) => {
  const fixture = path.join(
    path.dirname(store),
    `fixture-${fs.readdirSync(path.dirname(store)).length}.jsonl`
  )
  writeLines(fixture, lines)
  return relaykeep(["memory", "import", "--store", store, "--fixture", fixture])
}

const newStore = () => path.join(mcp.tempDir(), "memory.jsonl")

const serveHeavy = async (extra: ReadonlyArray<string> = []): Promise<{ session: Session; root: string }> => {
  const store = newStore()
  const rows = heavyRows()
  assert.deepStrictEqual(cliJson(ImportReport, await importInto(store, rows)), {
    imported: rows.length,
    unchanged: 0,
    total: rows.length
  })
  const root = path.join(path.dirname(store), "root")
  const session = await mcp.connect(memoryBin, ["--store", store, "--root", root, ...extra])
  // Loaded and indexed before anything is compared.
  await callOk(session, ReadResult, "read", { id: "light" })
  return { session, root }
}

describe("relaykeep-memory limits", () => {
  it("an import with a row one byte over a limit is refused whole, naming the line", async () => {
    const store = newStore()
    const base = '{"id":"a","text":"first","source":"s"}'
    cliJson(ImportReport, await importInto(store, [base]))
    const before = bytesOf(store)
    const overs = [
      [
        rowAt("t", MemoryLimits.textBytes + 1, MemoryLimits.rowBytes).line,
        "text: must be at most 1,048,576 bytes"
      ],
      [rowAt("r", MemoryLimits.textBytes, MemoryLimits.rowBytes + 1).line, "is longer than 2,097,152 bytes"]
    ] as const
    for (const [bad, rule] of overs) {
      const result = await importInto(store, ['{"id":"b","text":"second","source":"s"}', bad])
      const line = cliFailure(result, 2, "InvalidInput")
      assert.include(line, `line 2: ${rule}`)
      assert.notInclude(result.stderr, secret)
      assert.deepStrictEqual(bytesOf(store), before)
    }
  })

  it("a record exactly at the limits imports and reads back whole over stdio, and search finds it", async () => {
    const store = newStore()
    const atCap = rowAt("cap", MemoryLimits.textBytes, MemoryLimits.rowBytes)
    // And a text of 1 MiB in four-byte characters, and one of control characters (escaped in six).
    const wide = JSON.stringify({
      id: "wide",
      text: "🙂".repeat(MemoryLimits.textBytes / 4),
      source: "limits"
    })
    const control = JSON.stringify({ id: "ctl", text: "\u0001".repeat(349_000), source: "limits" })
    assert.isAtMost(utf8Length(control), MemoryLimits.rowBytes)
    assert.deepStrictEqual(cliJson(ImportReport, await importInto(store, [atCap.line, wide, control])), {
      imported: 3,
      unchanged: 0,
      total: 3
    })
    const session = await mcp.memory(store, path.join(path.dirname(store), "root"))
    for (const line of [atCap.line, wide, control]) {
      const { record } = await callOk(session, ReadResult, "read", { id: JSON.parse(line).id })
      assert.strictEqual(JSON.stringify(record), line)
    }
    const { hits } = await callOk(session, SearchResult, "search", { query: secret })
    assert.deepStrictEqual(
      hits.map((hit) => [hit.id, hit.score]),
      [["cap", 1]]
    )
    assert.isAtMost(hits[0]?.snippet.length ?? 0, 162)
  })

  it("a cheap read made while a heavy search runs is answered first, and the search still ends well", async () => {
    const { session } = await serveHeavy(["--search-timeout", "10m"])
    const order: Array<string> = []
    const search = call(session, "search", { query: heavyQuery, limit: 5 }).then((result) => {
      order.push("search")
      return result
    })
    // Well inside the search (a second or more); a server that kept the event loop to itself
    // during a search would only read this request once the search was over.
    await new Promise((resolve) => setTimeout(resolve, 200))
    const read = await call(session, "read", { id: "light" })
    order.push("read")
    const searched = await search
    assert.deepStrictEqual(order, ["read", "search"])
    assert.deepStrictEqual(okResult(ReadResult, read).record, {
      id: "light",
      text: "a small note",
      source: "test"
    })
    assert.deepStrictEqual(
      okResult(SearchResult, searched).hits.map((hit) => hit.id),
      heavyTopIds
    )
  })

  it("a search past --search-timeout is ToolTimeout, audited as timeout, and the server keeps serving", async () => {
    const { session, root } = await serveHeavy(["--search-timeout", "100ms"])
    const message = errorResult(await call(session, "search", { query: heavyQuery }), "ToolTimeout")
    assert.strictEqual(message, "search did not finish within 100 ms")
    const { hits } = await callOk(session, SearchResult, "search", { query: "small NOTE" })
    assert.deepStrictEqual(
      hits.map((hit) => hit.id),
      ["light"]
    )
    await callOk(session, ReadResult, "read", { id: "h3" })
    assert.include(
      await callError(session, "InvalidArguments", "search", { query: "x".repeat(1001) }),
      "query"
    )
    const entries = fs
      .readdirSync(path.join(root, "audit"))
      .filter((name) => name.endsWith(".jsonl"))
      .flatMap((name) => fs.readFileSync(path.join(root, "audit", name), "utf8").split("\n"))
      .filter((line) => line !== "")
      .map((line) => Schema.decodeUnknownSync(Schema.parseJson(AuditEntry))(line))
    assert.deepStrictEqual(
      entries.map((entry) => [entry.tool, entry.status]),
      [
        ["read", "ok"],
        ["search", "timeout"],
        ["search", "ok"],
        ["read", "ok"],
        ["search", "invalid"]
      ]
    )
  })
})
