/** The audit log's files: one JSONL file per UTC day, appended and fsynced. */
import type { FileSystem, Path } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import {
  ensureDirectory,
  isNotFound,
  listDirectory,
  refuseSymlink,
  removeIfExists,
  syncDirectory,
  toStorageError,
  utf8,
  writeDurable
} from "../platform/durable.js"
import type { AuditEntry } from "../domain/audit.js"
import { AuditEntry as AuditEntrySchema } from "../domain/audit.js"

interface Files {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly dir: string
  readonly tempName: Effect.Effect<string>
}

const DayFile = /^\d{4}-\d{2}-\d{2}\.jsonl$/
const decodeLine = Schema.decodeUnknownEither(Schema.parseJson(AuditEntrySchema))
const line = (entry: AuditEntry) => `${JSON.stringify(entry)}\n`

/**
 * Append one entry and fsync it (and the directory, when the file was empty: it may be new).
 * Runs under the audit lock, so the size seen here is the size the line is appended at.
 */
export const appendEntry = ({ fs, path, dir }: Files, entry: AuditEntry) => {
  const file = path.join(dir, `${entry.time.slice(0, 10)}.jsonl`)
  const open = fs.open(file, { flag: "a+", mode: 0o600 })
  return Effect.scoped(
    Effect.gen(function* () {
      // Appending in place would follow a link planted under the day's name.
      yield* refuseSymlink(fs, file)
      // The directory is made only when the first open finds it missing.
      const handle = yield* open.pipe(
        Effect.catchIf(isNotFound, () => Effect.zipRight(ensureDirectory(fs, dir), open))
      )
      // A torn last line (a crash mid-append) must not swallow this entry: start a new line.
      const size = Number((yield* handle.stat).size)
      let prefix = ""
      if (size > 0) {
        yield* handle.seek(size - 1, "start")
        const last = yield* handle.readAlloc(1)
        if (last._tag === "Some" && last.value[0] !== 0x0a) prefix = "\n"
      }
      yield* handle.writeAll(utf8(prefix + line(entry)))
      yield* handle.sync
      return size === 0
    })
  ).pipe(
    Effect.mapError((error) =>
      error._tag === "StorageError" ? error : toStorageError("append", file)(error)
    ),
    Effect.flatMap((wasEmpty) => (wasEmpty ? syncDirectory(fs, dir) : Effect.void))
  )
}

/** Every entry, oldest first. A line that does not decode (a torn append) is skipped. */
export const readEntries = ({ fs, path, dir }: Files) =>
  Effect.gen(function* () {
    const entries: Array<AuditEntry> = []
    for (const name of [...(yield* listDirectory(fs, dir))].filter((n) => DayFile.test(n)).sort()) {
      const file = path.join(dir, name)
      const text = yield* fs.readFileString(file).pipe(Effect.mapError(toStorageError("read", file)))
      for (const row of text.split("\n")) {
        if (row.trim() === "") continue
        const decoded = decodeLine(row)
        if (Either.isRight(decoded)) entries.push(decoded.right)
      }
    }
    return entries
  })

/** Replace the log's contents with `kept` (oldest first), file by file, durably. */
export const rewriteEntries = ({ fs, path, dir, tempName }: Files, kept: ReadonlyArray<AuditEntry>) =>
  Effect.gen(function* () {
    const byDay = new Map<string, Array<AuditEntry>>()
    for (const entry of kept) {
      const day = `${entry.time.slice(0, 10)}.jsonl`
      byDay.set(day, [...(byDay.get(day) ?? []), entry])
    }
    for (const name of (yield* listDirectory(fs, dir)).filter((n) => DayFile.test(n))) {
      const file = path.join(dir, name)
      const rows = byDay.get(name)
      if (rows === undefined) yield* removeIfExists(fs, file)
      else yield* writeDurable(fs, path, file, yield* tempName, utf8(rows.map(line).join("")))
    }
  })
