/**
 * A search's scan, stepped: each step does one unit of work when given a budget of one (one
 * term on one record), so counting steps counts the work. Terms given twice cost nothing more;
 * a record that lacks a term is left at the first term it lacks; a large record is split
 * between steps, term by term, instead of being scored in one go.
 */
import { assert, describe, it } from "@effect/vitest"
import type { StoredMemory } from "../../src/domain/memory.js"
import { queryProblem, searchMemory, searchTerms } from "../../src/domain/memory.js"
import { MemoryScan } from "../../src/domain/memoryScan.js"

const stored = (texts: ReadonlyArray<string>): ReadonlyArray<StoredMemory> =>
  texts.map((text, n) => {
    const record = { id: `m-${n}`, text, source: "s" }
    return { record, original: record, folded: text.toLowerCase() }
  })

/** Steps of budget 1 until the scan is done, and its hits. */
const stepped = (records: ReadonlyArray<StoredMemory>, query: string) => {
  const scan = new MemoryScan(records, records.keys(), searchTerms(query), 5)
  let steps = 0
  while (!scan.step(1)) steps++
  return { steps, hits: scan.hits() }
}

const big = stored(["a".repeat(1024 * 1024)])
const many = Array.from({ length: 32 }, (_, n) => "a".repeat(n + 1)).join(" ")

describe("MemoryScan", () => {
  it("a term given again, in any case, is searched and counted once", () => {
    assert.deepStrictEqual(searchTerms("Tide tide TIDE lighthouse tide LightHouse"), ["tide", "lighthouse"])
    const records = stored(["tide and lighthouse, tide again", "lighthouse", "the tide"])
    const once = stepped(records, "tide lighthouse")
    const repeated = stepped(records, `${"TIDE tide ".repeat(200)}lighthouse ${"Lighthouse ".repeat(200)}`)
    assert.deepStrictEqual(repeated.hits, once.hits)
    assert.deepStrictEqual(
      once.hits.map((hit) => [hit.id, hit.score]),
      [["m-0", 3]]
    )
    assert.strictEqual(repeated.steps, once.steps, "no more work for the repeats")
  })

  it("the query of the report (1,000 repeats against a 2 MiB record) is one term's work", () => {
    const records = stored(["a".repeat(2 * 1024 * 1024)])
    const report = stepped(records, "a ".repeat(1000))
    assert.strictEqual(report.steps, stepped(records, "a").steps)
    assert.strictEqual(report.hits[0]?.score, 2 * 1024 * 1024)
  })

  it("one step of a small budget scores one term of a large record, not the whole record", () => {
    // 32 terms: 32 checks that each is there, then 32 counts; the step after the last one ends.
    assert.strictEqual(stepped(big, many).steps, 64)
    assert.strictEqual(stepped(big, "a").steps, 2)
    // A term the record lacks ends its scoring at that term: no counting at all.
    assert.strictEqual(stepped(big, `${many} b`).steps, 33)
    assert.deepStrictEqual(stepped(big, `${many} b`).hits, [])
  })

  it("stepped or run in one go, the same hits", () => {
    const records = stored(["b ab abc", "abc abc", "c", "ABCABC", "bcb"])
    for (const query of ["b", "abc", "b c", "bc ab", "zz", "a b c"])
      assert.deepStrictEqual(stepped(records, query).hits, searchMemory(records, query, 5), query)
  })

  it("queryProblem names the rule a query breaks, counting distinct folded terms", () => {
    assert.isUndefined(queryProblem("x".repeat(200)))
    assert.isUndefined(queryProblem("a ".repeat(500)))
    assert.isUndefined(queryProblem(Array.from({ length: 32 }, (_, n) => `t${n}`).join(" ")))
    // 33 spellings, but 32 terms once folded.
    assert.isUndefined(queryProblem([...Array.from({ length: 32 }, (_, n) => `t${n}`), "T0"].join(" ")))
    assert.strictEqual(queryProblem("a".repeat(1001)), "must be at most 1,000 characters")
    assert.strictEqual(
      queryProblem(Array.from({ length: 33 }, (_, n) => `t${n}`).join(" ")),
      "must have at most 32 distinct terms"
    )
    assert.strictEqual(queryProblem("x".repeat(201)), "must have no term longer than 200 characters")
  })
})
