/** The memory store's file: JSONL, read whole, appended durably, never rewritten. */
import type { FileSystem, Path } from "@effect/platform"
import { Effect, Either, Option } from "effect"
import { canonicalJson } from "../domain/canonical.js"
import { InvalidInput, InvalidRecord } from "../domain/errors.js"
import type { StoredMemory } from "../domain/memory.js"
import { countText, MemoryLimits, utf8Length } from "../domain/memory.js"
import { isNotFound, syncDirectory, toStorageError, utf8 } from "../platform/durable.js"
import { parseRows, storeTooLarge } from "./memoryRows.js"

interface Deps {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly store: string
}

export type { MemoryImportReport as ImportReport } from "../domain/memory.js"

/** A loaded store: its records, and its size in bytes. */
export interface LoadedMemory {
  readonly records: ReadonlyArray<StoredMemory>
  readonly bytes: number
}

/** The lock key beside the store: `<name>.lock`, with characters a lock key cannot hold replaced. */
export const lockKeyFor = (basename: string): string =>
  `${basename.replace(/[^A-Za-z0-9._-]/g, "_")}.lock`.replace(/^\./, "_")

const ReadChunk = 1024 * 1024

/**
 * The bytes of `file`, or none when they are more than a store may hold: read a chunk at a time
 * and never past one byte over the limit, so that a huge file (or a device that never ends)
 * costs no more than that.
 */
const readBounded = (fs: FileSystem.FileSystem, file: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* fs.open(file, { flag: "r" })
      const chunks: Array<Uint8Array> = []
      let total = 0
      while (total <= MemoryLimits.storeBytes) {
        const chunk = yield* handle.readAlloc(ReadChunk)
        if (Option.isNone(chunk)) break
        chunks.push(chunk.value)
        total += chunk.value.length
      }
      if (total > MemoryLimits.storeBytes) return Option.none<Uint8Array>()
      const bytes = new Uint8Array(total)
      let at = 0
      for (const chunk of chunks) {
        bytes.set(chunk, at)
        at += chunk.length
      }
      return Option.some(bytes)
    })
  )

/** The store's records; a missing store is an empty one. */
export const loadMemoryFile = ({ fs, store }: Deps) =>
  Effect.gen(function* () {
    const read = yield* readBounded(fs, store).pipe(
      Effect.catchIf(isNotFound, () => Effect.succeed(Option.some(new Uint8Array(0)))),
      Effect.mapError(toStorageError("read", store))
    )
    if (Option.isNone(read)) return yield* new InvalidRecord({ file: store, reason: storeTooLarge })
    const rows = yield* Either.mapLeft(
      parseRows(read.value),
      (reason) => new InvalidRecord({ file: store, reason })
    )
    const records = rows.map((row): StoredMemory => ({
      record: row.record,
      original: row.original,
      folded: row.record.text.toLowerCase()
    }))
    return { records, bytes: read.value.length } satisfies LoadedMemory
  })

/**
 * Decide the whole import before touching the store. One invalid row, one conflict, or a store
 * that would grow past its limits rejects it all.
 */
export const planImport = ({ fs }: Deps, existing: LoadedMemory, fixture: string) =>
  Effect.gen(function* () {
    const field = `--fixture ${fixture}`
    const read = yield* readBounded(fs, fixture).pipe(
      Effect.mapError((error) => new InvalidInput({ field: "--fixture", reason: error.message }))
    )
    if (Option.isNone(read)) return yield* new InvalidInput({ field, reason: storeTooLarge })
    const rows = yield* Either.mapLeft(parseRows(read.value), (reason) => new InvalidInput({ field, reason }))
    const known = new Map(
      existing.records.map((stored) => [stored.record.id, canonicalJson(stored.original)])
    )
    const lines: Array<string> = []
    let unchanged = 0
    // What the append adds: each line and its newline, and a newline before them if the store lacks one.
    let bytes = existing.bytes + 1
    for (const row of rows) {
      const before = known.get(row.record.id)
      if (before === row.content) {
        unchanged++
        continue
      }
      if (before !== undefined) {
        return yield* new InvalidInput({
          field,
          reason: `row ${rows.indexOf(row) + 1}: its id already exists with different content`
        })
      }
      known.set(row.record.id, row.content)
      lines.push(row.line)
      bytes += utf8Length(row.line) + 1
    }
    const total = existing.records.length + lines.length
    if (total > MemoryLimits.storeRecords)
      return yield* new InvalidInput({
        field,
        reason: `the store would hold ${countText(total)} records, over the limit of ${countText(MemoryLimits.storeRecords)}`
      })
    if (lines.length > 0 && bytes > MemoryLimits.storeBytes)
      return yield* new InvalidInput({
        field,
        reason: `the store would grow past ${countText(MemoryLimits.storeBytes)} bytes (128 MiB), the limit of a memory store`
      })
    return { lines, report: { imported: lines.length, unchanged, total } }
  })

const readText = (fs: FileSystem.FileSystem, file: string) =>
  fs.readFileString(file).pipe(
    Effect.catchIf(isNotFound, () => Effect.succeed("")),
    Effect.mapError(toStorageError("read", file))
  )

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
