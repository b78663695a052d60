/** The memory store's file: JSONL, read whole, appended durably, never rewritten. */
import type { FileSystem, Path } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { canonicalJson } from "../domain/canonical.js"
import { InvalidInput, InvalidRecord } from "../domain/errors.js"
import { describeParseError } from "../domain/input.js"
import { describeJsonError, parseJson } from "../domain/json.js"
import type { MemoryRecord, StoredMemory } from "../domain/memory.js"
import { MemoryRecord as MemoryRecordSchema } from "../domain/memory.js"
import { isNotFound, syncDirectory, toStorageError, utf8 } from "./file/durable.js"

interface Deps {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly store: string
}

export interface ImportReport {
  readonly imported: number
  readonly unchanged: number
  readonly total: number
}

const decodeRecord = Schema.decodeUnknownEither(MemoryRecordSchema, {
  errors: "first",
  onExcessProperty: "error"
})

/** The lock key beside the store: `<name>.lock`, with characters a lock key cannot hold replaced. */
export const lockKeyFor = (basename: string): string =>
  `${basename.replace(/[^A-Za-z0-9._-]/g, "_")}.lock`.replace(/^\./, "_")

/** Parse JSONL text; the first bad line's number and reason, or the rows with their text. */
const parseLines = (
  text: string
): Either.Either<
  ReadonlyArray<{
    readonly line: string
    readonly original: unknown
    readonly record: MemoryRecord
    /** The row's canonical JSON, what an import compares. */
    readonly content: string
  }>,
  string
> => {
  const rows: Array<{ line: string; original: unknown; record: MemoryRecord; content: string }> = []
  const lines = text.split("\n")
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim()
    if (line === "") continue
    const parsed = parseJson(line)
    if (Either.isLeft(parsed))
      return Either.left(`line ${index + 1}: not valid JSON: ${describeJsonError(parsed.left)}`)
    const original = parsed.right
    const record = decodeRecord(original)
    if (Either.isLeft(record)) return Either.left(`line ${index + 1}: ${describeParseError(record.left)}`)
    // A lone surrogate (`"\ud800"`) decodes but has no canonical form: two such rows would hash alike.
    const content = Either.try(() => canonicalJson(original))
    if (Either.isLeft(content))
      return Either.left(`line ${index + 1}: a string holds a lone surrogate (it is not well-formed Unicode)`)
    rows.push({ line, original, record: record.right, content: content.right })
  }
  return Either.right(rows)
}

const readText = (fs: FileSystem.FileSystem, file: string) =>
  fs.readFileString(file).pipe(
    Effect.catchIf(isNotFound, () => Effect.succeed("")),
    Effect.mapError(toStorageError("read", file))
  )

export const parseMemoryFile = ({ fs, store }: Deps) =>
  Effect.gen(function* () {
    const rows = yield* Either.mapLeft(
      parseLines(yield* readText(fs, store)),
      (reason) => new InvalidRecord({ file: store, reason })
    )
    return rows.map((row): StoredMemory => ({
      record: row.record,
      original: row.original,
      folded: row.record.text.toLowerCase()
    }))
  })

/** Decide the whole import before touching the store. One invalid row or conflict rejects it all. */
export const planImport = ({ fs }: Deps, existing: ReadonlyArray<StoredMemory>, fixture: string) =>
  Effect.gen(function* () {
    const text = yield* fs
      .readFileString(fixture)
      .pipe(Effect.mapError((error) => new InvalidInput({ field: "--fixture", reason: error.message })))
    const rows = yield* Either.mapLeft(
      parseLines(text),
      (reason) => new InvalidInput({ field: `--fixture ${fixture}`, reason })
    )
    const known = new Map(existing.map((stored) => [stored.record.id, canonicalJson(stored.original)]))
    const lines: Array<string> = []
    let unchanged = 0
    for (const row of rows) {
      const content = row.content
      const before = known.get(row.record.id)
      if (before === content) {
        unchanged++
        continue
      }
      if (before !== undefined) {
        return yield* new InvalidInput({
          field: `--fixture ${fixture}`,
          reason: `id ${JSON.stringify(row.record.id)} already exists with different content`
        })
      }
      known.set(row.record.id, content)
      lines.push(row.line)
    }
    return { lines, report: { imported: lines.length, unchanged, total: existing.length + lines.length } }
  })

/** Append whole lines and fsync them (and the directory, when the store is new). */
export const appendMemories = ({ fs, path, store }: Deps, lines: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    if (lines.length === 0) return
    const before = yield* readText(fs, store)
    const separator = before.length > 0 && !before.endsWith("\n") ? "\n" : ""
    yield* Effect.scoped(
      Effect.gen(function* () {
        const handle = yield* fs.open(store, { flag: "a", mode: 0o600 })
        yield* handle.writeAll(utf8(`${separator}${lines.join("\n")}\n`))
        yield* handle.sync
      })
    ).pipe(
      Effect.mapError(toStorageError("append", store)),
      // A half-written line would damage the store for every later read: put it back as it was.
      Effect.tapError(() => fs.truncate(store, utf8(before).length).pipe(Effect.ignore))
    )
    if (before.length === 0) yield* syncDirectory(fs, path.dirname(store))
  })
