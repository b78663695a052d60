/**
 * The indexed search returns exactly what the plain scan returned: same hits, same order, same
 * scores and snippets. The reference below is the plain scan as it was before the index (score
 * every record, sort them all, slice), so the bounded top-k of `rankMemory` is checked too.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import type { MemoryHit, StoredMemory } from "../../src/domain/memory.js"
import { searchMemory, SnippetLength } from "../../src/domain/memory.js"
import { indexMemory, scanIndexed, searchIndexed } from "../../src/domain/memoryIndex.js"

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

/** The terms, restated: lower case, split on whitespace, each distinct term once, first seen first. */
const termsOf = (query: string): ReadonlyArray<string> =>
  query
    .toLowerCase()
    .split(/\s+/)
    .filter((term, at, all) => term !== "" && all.indexOf(term) === at)

const referenceSearch = (records: ReadonlyArray<StoredMemory>, query: string, limit: number) => {
  const terms = termsOf(query)
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
    // Several terms, some short, some absent, some given twice (in another case, too).
    fc
      .array(fc.constantFrom(...Alphabet, "zz", "abca", "BAB", "ç"), { minLength: 1, maxLength: 6 })
      .map((parts) => parts.join(" ")),
    fc
      .array(fc.constantFrom("a", "A", "ab", "AB", "abc", "b"), { minLength: 2, maxLength: 8 })
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
          // Stepped one unit of work at a time, as a server runs a long search: the same hits.
          const scan = scanIndexed(index, query, input.limit)
          while (!scan.step(1));
          assert.deepStrictEqual(scan.hits(), expected, `stepped: ${query}`)
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

  it.effect("a query with more windows than the index intersects lists for finds the same hits", () =>
    Effect.sync(() => {
      // 50 pseudo-random words of 24 letters: a query of three has about 66 distinct windows, more
      // than the 32 lists intersected.
      const letter = (n: number, at: number) => {
        const h = Math.imul(((n % 50) * 7919 + at * 104729) ^ 0x5bd1e995, 0x2c1b3c6d)
        return String.fromCharCode(97 + (((h ^ (h >>> 13)) >>> 0) % 26))
      }
      const word = (n: number) => Array.from({ length: 24 }, (_, at) => letter(n, at)).join("")
      const texts = Array.from(
        { length: 2000 },
        (_, n) => `${word(n)} ${word(n * 3 + 1)} ${word(n * 7 + 2)} note`
      )
      const records = stored(texts)
      const index = indexMemory(records)
      for (const query of [
        `${word(3)} ${word(10)} ${word(23)}`,
        `${word(4)} ${word(13)} ${word(30)} note`,
        `${word(5)} ${word(6)} ${word(7)} ${word(8)}`,
        `${word(1)}x ${word(2)} ${word(3)}`
      ])
        for (const limit of [1, 20, 3000]) {
          const expected = referenceSearch(records, query, limit)
          assert.deepStrictEqual(searchIndexed(index, query, limit), expected, `${query} / ${limit}`)
        }
      assert.isAbove(searchIndexed(index, `${word(3)} ${word(10)} ${word(23)}`, 20).length, 0)
    })
  )
})
