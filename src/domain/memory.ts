/** Memory records and their search: pure, so the server, the import and the tests agree. */
import { Schema } from "effect"
import { LoneSurrogate, Printable } from "./ids.js"

export const MemoryId = Schema.String.pipe(
  Schema.filter((text) => !LoneSurrogate.test(text), { message: () => "must be well-formed Unicode" }),
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(200, { message: () => "must be at most 200 characters" }),
  Schema.pattern(Printable, { message: () => "must contain printable characters only" })
)

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
  id: Schema.String,
  snippet: Schema.String,
  source: Schema.String,
  score: Schema.Int
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

/**
 * Records whose text contains every term as a case-insensitive substring, ordered by the total
 * number of occurrences of the terms, then by their order in the file.
 */
export const searchMemory = (
  records: ReadonlyArray<StoredMemory>,
  query: string,
  limit: number
): ReadonlyArray<MemoryHit> => {
  const terms = searchTerms(query)
  const first = terms[0]
  if (first === undefined) return []
  const scored: Array<{ readonly hit: StoredMemory; readonly score: number; readonly index: number }> = []
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
  return scored.slice(0, limit).map(({ hit, score }) => ({
    id: hit.record.id,
    snippet: snippetOf(hit.record.text, hit.folded, first),
    source: hit.record.source,
    score
  }))
}
