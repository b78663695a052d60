/**
 * The indexed search returns exactly what the plain scan returned: same hits, same order, same
 * scores and snippets. The reference below is the plain scan as it was before the index (score
 * every record, sort them all, slice), so the bounded top-k of `rankMemory` is checked too.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import type { MemoryHit, StoredMemory } from "../../src/domain/memory.js"
import { searchMemory, searchTerms, SnippetLength } from "../../src/domain/memory.js"
import { indexMemory, searchIndexed } from "../../src/domain/memoryIndex.js"

const occurrences = (haystack: string, needle: string): number => {
  let count = 0
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length))
    count++
  return count
}

const snippetOf = (text: string, folded: string, term: string): string => {
  const at = Math.max(0, folded.indexOf(term))
  const start = Math.max(0, Math.min(at - Math.floor(SnippetLength / 3), text.length - SnippetLength))
  const body = text.slice(start, start + SnippetLength).replace(/\s+/g, " ")
  return `${start > 0 ? "…" : ""}${body}${start + SnippetLength < text.length ? "…" : ""}`
}

const referenceSearch = (records: ReadonlyArray<StoredMemory>, query: string, limit: number) => {
  const terms = searchTerms(query)
  const first = terms[0]
  if (first === undefined) return []
  const scored: Array<{ hit: StoredMemory; score: number; index: number }> = []
  records.forEach((stored, index) => {
    let score = 0
    for (const term of terms) {
      const count = occurrences(stored.folded, term)
      if (count === 0) return
      score += count
    }
    scored.push({ hit: stored, score, index })
  })
  scored.sort((a, b) => b.score - a.score || a.index - b.index)
  return scored.slice(0, limit).map(({ hit, score }): MemoryHit => ({
    id: hit.record.id,
    snippet: snippetOf(hit.record.text, hit.folded, first),
    source: hit.record.source,
    score
  }))
}

const stored = (texts: ReadonlyArray<string>): ReadonlyArray<StoredMemory> =>
  texts.map((text, n) => {
    const record = { id: `m-${n}`, text, source: `s-${n % 3}` }
    return { record, original: record, folded: text.toLowerCase() }
  })

// A small alphabet, so that terms repeat, overlap and collide; with case, whitespace, and
// characters whose lower case is longer ("İ") or that take two code units ("🙂").
const Alphabet = ["a", "b", "c", "A", "B", "ab", "abc", "aa", " ", "\n", "\t", "-", "1", "İ", "ß", "é", "🙂"]
const text = fc
  .array(fc.constantFrom(...Alphabet), { minLength: 1, maxLength: 40 })
  .map((parts) => parts.join(""))

const querySpace = (texts: ReadonlyArray<string>) =>
  fc.oneof(
    // A piece of one of the texts, so that most queries hit something.
    fc.tuple(fc.nat(), fc.nat(), fc.integer({ min: 1, max: 8 })).map(([which, from, length]) => {
      const source = texts[which % texts.length] ?? ""
      const start = from % Math.max(1, source.length)
      return source.slice(start, start + length)
    }),
    // Several terms, some short, some absent.
    fc
      .array(fc.constantFrom(...Alphabet, "zz", "abca", "BAB", "ç"), { minLength: 1, maxLength: 6 })
      .map((parts) => parts.join(" ")),
    fc.constantFrom("", "   ", "a", "ab", "abc", "ABC abc", "ı", "i̇")
  )

const cases = fc.array(text, { minLength: 0, maxLength: 60 }).chain((texts) =>
  fc.record({
    texts: fc.constant(texts),
    queries: fc.array(querySpace(texts.length > 0 ? texts : ["a"]), { minLength: 1, maxLength: 10 }),
    limit: fc.oneof(fc.integer({ min: 1, max: 25 }), fc.constantFrom(0, 64, 65, 1000))
  })
)

describe("memory search through the index", () => {
  it.effect.prop(
    "returns exactly what the plain scan returned",
    { input: cases },
    ({ input }) =>
      Effect.sync(() => {
        const records = stored(input.texts)
        const index = indexMemory(records)
        for (const query of input.queries) {
          const expected = referenceSearch(records, query, input.limit)
          assert.deepStrictEqual(searchMemory(records, query, input.limit), expected, `scan: ${query}`)
          assert.deepStrictEqual(searchIndexed(index, query, input.limit), expected, `index: ${query}`)
        }
      }),
    { fastCheck: { numRuns: 200, seed: 20261130 } }
  )

  it.effect("a corpus with thousands of hits per term ranks and cuts the same way", () =>
    Effect.sync(() => {
      // Every record holds "deploy"; the score grows and falls with n, so ties are many and
      // the order among them is file order.
      const texts = Array.from(
        { length: 5000 },
        (_, n) => `${"deploy ".repeat(1 + (n % 7))}service-${n % 13} at ${n % 24}:00 UTC`
      )
      const records = stored(texts)
      const index = indexMemory(records)
      for (const query of ["deploy", "DEPLOY service-3", "service-1", "7:00 utc", "deploy nowhere", "de"])
        for (const limit of [1, 5, 20, 100, 6000]) {
          const expected = referenceSearch(records, query, limit)
          assert.deepStrictEqual(searchIndexed(index, query, limit), expected, `${query} / ${limit}`)
        }
      assert.strictEqual(searchIndexed(index, "deploy", 20).length, 20)
      assert.strictEqual(searchIndexed(index, "deploy nowhere", 20).length, 0)
    })
  )
})
