/** Memory records and their search: pure, so the server, the import and the tests agree. */
import { Schema } from "effect"
import { Integer } from "./fields.js"
import { PrintableKey } from "./ids.js"

/** A record's id: 1–200 printable characters. */
export const MemoryId = PrintableKey

/** One line of a memory store. Other keys are rejected (decode with onExcessProperty: "error"). */
export const MemoryRecord = Schema.Struct({
  id: MemoryId,
  text: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" })),
  source: Schema.String,
  tags: Schema.optional(Schema.Array(Schema.String)),
  created_at: Schema.optional(Schema.String)
})
export type MemoryRecord = typeof MemoryRecord.Type

/** A record as stored: the decoded fields, and the object exactly as it was imported. */
export interface StoredMemory {
  readonly record: MemoryRecord
  readonly original: unknown
  /** `text`, lower-cased once at load for searching. */
  readonly folded: string
}

export const MemoryHit = Schema.Struct({
  id: Schema.String.annotations({ description: "The record's id; read it whole with the read tool" }),
  snippet: Schema.String.annotations({
    description: "About 160 characters of the record's text around the first term, … where cut"
  }),
  source: Schema.String.annotations({ description: "Where the record came from, as imported" }),
  score: Integer({ minimum: 1 }).annotations({
    description: "How many times the query's terms occur in the record's text"
  })
})
export type MemoryHit = typeof MemoryHit.Type

export const SnippetLength = 160

const occurrences = (haystack: string, needle: string): number => {
  let count = 0
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length))
    count++
  return count
}

export const searchTerms = (query: string): ReadonlyArray<string> =>
  query
    .toLowerCase()
    .split(/\s+/)
    .filter((term) => term.length > 0)

const snippetOf = (text: string, folded: string, term: string): string => {
  const at = Math.max(0, folded.indexOf(term))
  const start = Math.max(0, Math.min(at - Math.floor(SnippetLength / 3), text.length - SnippetLength))
  const body = text.slice(start, start + SnippetLength).replace(/\s+/g, " ")
  return `${start > 0 ? "…" : ""}${body}${start + SnippetLength < text.length ? "…" : ""}`
}

interface Scored {
  readonly hit: StoredMemory
  readonly score: number
  readonly index: number
}

/** Higher score first, then file order: a total order, since indices differ. */
const before = (a: Scored, b: Scored) => b.score - a.score || a.index - b.index

/**
 * The first `limit` hits in that order. A small limit keeps only the best so far (a search
 * for a common word scores tens of thousands of records, and sorting them all would cost more
 * than scoring them); a large one collects and sorts, as `slice(0, limit)` of the sorted whole.
 */
class TopHits {
  private readonly kept: Array<Scored> = []
  private readonly bounded: boolean
  constructor(private readonly limit: number) {
    this.bounded = Number.isInteger(limit) && limit > 0 && limit <= 64
  }
  add(scored: Scored) {
    const kept = this.kept
    if (!this.bounded) {
      kept.push(scored)
      return
    }
    const last = kept[kept.length - 1]
    if (kept.length === this.limit && last !== undefined && before(scored, last) >= 0) return
    let at = kept.length
    while (at > 0 && before(scored, kept[at - 1] ?? scored) < 0) at--
    kept.splice(at, 0, scored)
    if (kept.length > this.limit) kept.pop()
  }
  best(): ReadonlyArray<Scored> {
    return this.bounded ? this.kept : this.kept.sort(before).slice(0, this.limit)
  }
}

/**
 * Score the records at `indices` (ascending) against `terms` and return the best `limit`:
 * records holding every term, by total occurrences of the terms, then by file order.
 */
export const rankMemory = (
  records: ReadonlyArray<StoredMemory>,
  indices: Iterable<number>,
  terms: ReadonlyArray<string>,
  limit: number
): ReadonlyArray<MemoryHit> => {
  const first = terms[0]
  if (first === undefined) return []
  const scored = new TopHits(limit)
  for (const index of indices) {
    const stored = records[index]
    if (stored === undefined) continue
    let score = 0
    for (const term of terms) {
      const count = occurrences(stored.folded, term)
      if (count === 0) {
        score = 0
        break
      }
      score += count
    }
    // Every term occurs at least once in a hit, so a hit's score is never 0.
    if (score > 0) scored.add({ hit: stored, score, index })
  }
  return scored.best().map(({ hit, score }) => ({
    id: hit.record.id,
    snippet: snippetOf(hit.record.text, hit.folded, first),
    source: hit.record.source,
    score
  }))
}

/**
 * Records whose text contains every term as a case-insensitive substring, ordered by the total
 * number of occurrences of the terms, then by their order in the file. A plain scan of every
 * record; a loaded store answers through its index instead (memoryIndex.ts), with the same hits.
 */
export const searchMemory = (
  records: ReadonlyArray<StoredMemory>,
  query: string,
  limit: number
): ReadonlyArray<MemoryHit> => rankMemory(records, records.keys(), searchTerms(query), limit)
