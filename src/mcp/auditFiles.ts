/** The audit log's files: one JSONL file per UTC day, read and rewritten (src/mcp/auditAppender.ts appends). */
import type { FileSystem, Path } from "@effect/platform"
import { Effect, Either, Schema } from "effect"
import { listDirectory, removeIfExists, toStorageError, utf8, writeDurable } from "../platform/durable.js"
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
/** An entry as it is stored: one JSON object and a newline. */
export const entryLine = (entry: AuditEntry): string => `${JSON.stringify(entry)}\n`
/** The name of the file that holds `entry`: its UTC day. */
export const dayFileOf = (entry: AuditEntry): string => `${entry.time.slice(0, 10)}.jsonl`

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
      const day = dayFileOf(entry)
      byDay.set(day, [...(byDay.get(day) ?? []), entry])
    }
    for (const name of (yield* listDirectory(fs, dir)).filter((n) => DayFile.test(n))) {
      const file = path.join(dir, name)
      const rows = byDay.get(name)
      if (rows === undefined) yield* removeIfExists(fs, file)
      else yield* writeDurable(fs, path, file, yield* tempName, utf8(rows.map(entryLine).join("")))
    }
  })
