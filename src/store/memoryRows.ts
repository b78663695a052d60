/**
 * The rows of a memory store's file, or of a file to import: JSONL bytes split into lines,
 * each checked against the row limits before it is parsed, then decoded as a record. Every
 * refusal names the line and the rule, never the line's content.
 */
import { Either, Schema } from "effect"
import { canonicalJson } from "../domain/canonical.js"
import { describeParseError } from "../domain/input.js"
import { describeJsonError, parseJson } from "../domain/json.js"
import type { MemoryRecord } from "../domain/memory.js"
import { countText, MemoryLimits, MemoryRecord as MemoryRecordSchema } from "../domain/memory.js"

export interface MemoryRow {
  readonly original: unknown
  readonly record: MemoryRecord
  /** The line as written (trimmed), what an import appends. */
  readonly line: string
  /** The row's canonical JSON, what an import compares. */
  readonly content: string
  /** The line's length in bytes, as written. */
  readonly bytes: number
}

const decodeRecord = Schema.decodeUnknownEither(MemoryRecordSchema, {
  errors: "first",
  onExcessProperty: "error"
})

const NewLine = 0x0a
const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** A file larger than a store may be: refused before its lines are looked at. */
export const storeTooLarge = `is larger than ${countText(MemoryLimits.storeBytes)} bytes (128 MiB), the limit of a memory store`

const rowTooLong = `is longer than ${countText(MemoryLimits.rowBytes)} bytes (2 MiB), the limit of a row`
const tooManyRows = `is past ${countText(MemoryLimits.storeRecords)} records, the limit of a memory store`

/** One line's record, or the rule it breaks (without its line number). */
const parseRow = (bytes: Uint8Array): Either.Either<MemoryRow | undefined, string> => {
  if (bytes.length > MemoryLimits.rowBytes) return Either.left(rowTooLong)
  let text: string
  try {
    text = strictUtf8.decode(bytes)
  } catch {
    return Either.left("is not valid UTF-8")
  }
  const line = text.trim()
  if (line === "") return Either.right(undefined)
  const parsed = parseJson(line)
  if (Either.isLeft(parsed)) return Either.left(`not valid JSON: ${describeJsonError(parsed.left)}`)
  const original = parsed.right
  const record = decodeRecord(original)
  if (Either.isLeft(record)) return Either.left(describeParseError(record.left))
  // A lone surrogate (`"\ud800"`) decodes but has no canonical form: two such rows would hash alike.
  const content = Either.try(() => canonicalJson(original))
  if (Either.isLeft(content))
    return Either.left("a string holds a lone surrogate (it is not well-formed Unicode)")
  return Either.right({ original, record: record.right, line, content: content.right, bytes: bytes.length })
}

/** Parse JSONL bytes; the rows, or the first bad line's number and the rule it breaks. */
export const parseRows = (bytes: Uint8Array): Either.Either<ReadonlyArray<MemoryRow>, string> => {
  if (bytes.length > MemoryLimits.storeBytes) return Either.left(storeTooLarge)
  const rows: Array<MemoryRow> = []
  let start = 0
  for (let number = 1; start < bytes.length; number++) {
    const cut = bytes.indexOf(NewLine, start)
    const end = cut === -1 ? bytes.length : cut
    const row = parseRow(bytes.subarray(start, end))
    start = end + 1
    if (Either.isLeft(row)) return Either.left(`line ${number}: ${row.left}`)
    if (row.right === undefined) continue
    if (rows.length === MemoryLimits.storeRecords) return Either.left(`line ${number}: ${tooManyRows}`)
    rows.push(row.right)
  }
  return Either.right(rows)
}
