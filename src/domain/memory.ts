/** Memory records, their limits and the terms of a search: pure, so the server, the import and the tests agree. */
import { Schema } from "effect"
import { Integer } from "./fields.js"
import { PrintableKey } from "./ids.js"
import { rankMemory } from "./memoryScan.js"

export { SnippetLength } from "./memoryScan.js"

/**
 * What a memory store holds at most. A row is one JSONL line as written (UTF-8, without its
 * newline). Two megabytes a row keeps the largest `read` answer (the record twice, once as
 * escaped text) under the 10 MiB an MCP client's stdio transport buffers for one message; a
 * store is loaded whole into memory, with its index, so it is bounded too.
 */
export const MemoryLimits = {
  textBytes: 1024 * 1024,
  sourceChars: 1024,
  rowBytes: 2 * 1024 * 1024,
  storeBytes: 128 * 1024 * 1024,
  storeRecords: 250_000
} as const

/** What a search asks for at most: longer queries, more terms or longer ones are refused. */
export const QueryLimits = { queryChars: 1000, terms: 32, termChars: 200 } as const

/** How long the memory server lets one search run, by default, before it answers `ToolTimeout`. */
export const DefaultSearchTimeoutSeconds = 10

/**
 * `1,048,576`: limits in messages are written out in full. By hand rather than with
 * `toLocaleString`, whose first call loads the locale data (12 ms of every command's start,
 * since messages built at load time call it).
 */
export const countText = (count: number): string => {
  if (!Number.isSafeInteger(count)) return String(count)
  const digits = String(Math.abs(count))
  const groups: Array<string> = []
  for (let end = digits.length; end > 0; end -= 3) groups.unshift(digits.slice(Math.max(0, end - 3), end))
  return `${count < 0 ? "-" : ""}${groups.join(",")}`
}

/** The length of `text` in UTF-8 bytes (a lone surrogate counts as the three bytes of U+FFFD). */
export const utf8Length = (text: string): number => {
  let bytes = 0
  for (let at = 0; at < text.length; at++) {
    const unit = text.charCodeAt(at)
    if (unit < 0x80) bytes += 1
    else if (unit < 0x800) bytes += 2
    else if (unit >= 0xd800 && unit <= 0xdbff && (text.charCodeAt(at + 1) & 0xfc00) === 0xdc00) {
      bytes += 4
      at++
    } else bytes += 3
  }
  return bytes
}

/** A record's id: 1–200 printable characters. */
export const MemoryId = PrintableKey

/** One line of a memory store. Other keys are rejected (decode with onExcessProperty: "error"). */
export const MemoryRecord = Schema.Struct({
  id: MemoryId,
  text: Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.filter((text) => utf8Length(text) <= MemoryLimits.textBytes, {
      message: () => `must be at most ${countText(MemoryLimits.textBytes)} bytes (1 MiB) as UTF-8`
    })
  ),
  source: Schema.String.pipe(
    Schema.filter((source) => source.length <= MemoryLimits.sourceChars, {
      message: () => `must be at most ${countText(MemoryLimits.sourceChars)} characters`
    })
  ),
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
    description: "How many times the query's distinct terms occur in the record's text"
  })
})
export type MemoryHit = typeof MemoryHit.Type

/**
 * The distinct terms of a query, folded as record texts are folded (lower case), in the order
 * they first appear: a term given twice is searched, and counted, once.
 */
export const searchTerms = (query: string): ReadonlyArray<string> => [
  ...new Set(
    query
      .toLowerCase()
      .split(/\s+/)
      .filter((term) => term.length > 0)
  )
]

/** The rule `query` breaks, in words (never quoting it), or undefined when it is within the limits. */
export const queryProblem = (query: string): string | undefined => {
  if (query.length > QueryLimits.queryChars)
    return `must be at most ${countText(QueryLimits.queryChars)} characters`
  const terms = searchTerms(query)
  if (terms.length > QueryLimits.terms) return `must have at most ${QueryLimits.terms} distinct terms`
  if (terms.some((term) => term.length > QueryLimits.termChars))
    return `must have no term longer than ${QueryLimits.termChars} characters`
  return undefined
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

/** What an import of memory records did: rows added, rows already there, records in all. */
export interface MemoryImportReport {
  readonly imported: number
  readonly unchanged: number
  readonly total: number
}
