/**
 * The file AuditLog: one JSONL file per UTC day under its directory, private (0600), filtered by
 * list, pruned by count or age with emptied day files removed, and tolerant of a torn last line.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Layer, TestClock } from "effect"
import { isoTime } from "../../src/domain/Task.js"
import type { AuditEntry, AuditStatus } from "../../src/domain/audit.js"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogLayer } from "../../src/mcp/auditLayer.js"
import { makeAuditAppender } from "../../src/mcp/auditAppender.js"
import { dayFileOf, entryLine } from "../../src/mcp/auditFiles.js"
import { Host } from "../../src/services/Host.js"
import { buildService, tempDir } from "../support/stores.js"

const Hour = 3_600_000
const Day1 = Date.UTC(2025, 5, 1, 9)
const Day2 = Date.UTC(2025, 5, 2, 9)
const Day3 = Date.UTC(2025, 5, 3, 9)

const entryAt = (millis: number, tool: string, status: AuditStatus, n = 0): AuditEntry => ({
  time: isoTime(millis),
  server: "srv",
  tool,
  status,
  duration_ms: n,
  arguments: { n },
  error: status === "ok" ? null : { tag: "Tagged", message: `failed ${n}` }
})

/** A fresh file audit log in `<temp>/audit`, with the file system to inspect it. */
const openLog = Effect.gen(function* () {
  const path = yield* Path.Path
  const dir = path.join(yield* tempDir, "audit")
  const audit = yield* buildService(
    AuditLog,
    auditLogLayer(dir).pipe(Layer.provide(Host.layerTest({})), Layer.provide(nodeContextLayer))
  )
  return { audit, dir, fs: yield* FileSystem.FileSystem, path }
})

const dayFiles = (fs: FileSystem.FileSystem, dir: string) =>
  Effect.map(fs.readDirectory(dir), (names) => names.filter((name) => name.endsWith(".jsonl")).sort())

const linesOf = (fs: FileSystem.FileSystem, file: string) =>
  Effect.map(fs.readFileString(file), (text) => {
    assert.isTrue(text.endsWith("\n"), `${file} ends with a newline`)
    return text
      .slice(0, -1)
      .split("\n")
      .map((line): unknown => JSON.parse(line))
  })

describe("auditLogLayer (files)", () => {
  it.scoped("appends one JSON line per entry to <dir>/<YYYY-MM-DD>.jsonl, mode 0600", () =>
    Effect.gen(function* () {
      const { audit, dir, fs, path } = yield* openLog
      const entries = [
        entryAt(Day1, "a", "ok", 1),
        entryAt(Day1 + Hour, "b", "denied", 2),
        entryAt(Day2, "a", "ok", 3)
      ]
      for (const entry of entries) yield* audit.append(entry)

      assert.deepStrictEqual(yield* dayFiles(fs, dir), ["2025-06-01.jsonl", "2025-06-02.jsonl"])
      assert.deepStrictEqual(yield* linesOf(fs, path.join(dir, "2025-06-01.jsonl")), entries.slice(0, 2))
      assert.deepStrictEqual(yield* linesOf(fs, path.join(dir, "2025-06-02.jsonl")), entries.slice(2))
      for (const name of yield* dayFiles(fs, dir)) {
        const info = yield* fs.stat(path.join(dir, name))
        assert.strictEqual(info.mode & 0o777, 0o600, name)
      }
      assert.strictEqual((yield* fs.stat(dir)).mode & 0o777, 0o700)
      assert.deepStrictEqual(yield* audit.list({}), entries)
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("never appends through a symbolic link planted under a day's name", () =>
    Effect.gen(function* () {
      const { audit, dir, fs, path } = yield* openLog
      yield* audit.append(entryAt(Day1, "a", "ok", 1))
      const elsewhere = path.join(yield* tempDir, "elsewhere.txt")
      yield* fs.writeFileString(elsewhere, "untouched\n")
      yield* fs.symlink(elsewhere, path.join(dir, "2025-06-02.jsonl"))
      const error = yield* Effect.flip(audit.append(entryAt(Day2, "a", "ok", 2)))
      assert.strictEqual(error._tag, "StorageError")
      assert.include(error.message, "is a symbolic link")
      assert.strictEqual(yield* fs.readFileString(elsewhere), "untouched\n")
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("list filters by status, tool and time, oldest first, and limit keeps the newest", () =>
    Effect.gen(function* () {
      const { audit } = yield* openLog
      const entries = [
        entryAt(Day1, "submit", "ok", 0),
        entryAt(Day1 + Hour, "read", "invalid", 1),
        entryAt(Day2, "submit", "denied", 2),
        entryAt(Day2 + Hour, "submit", "ok", 3),
        entryAt(Day3, "read", "ok", 4)
      ]
      for (const entry of entries) yield* audit.append(entry)
      const ns = (found: ReadonlyArray<AuditEntry>) => found.map((entry) => entry.duration_ms)

      assert.deepStrictEqual(ns(yield* audit.list({})), [0, 1, 2, 3, 4])
      assert.deepStrictEqual(ns(yield* audit.list({ status: "ok" })), [0, 3, 4])
      assert.deepStrictEqual(ns(yield* audit.list({ tool: "read" })), [1, 4])
      assert.deepStrictEqual(ns(yield* audit.list({ sinceMillis: Day2 })), [2, 3, 4])
      assert.deepStrictEqual(ns(yield* audit.list({ sinceMillis: Day2 + 1 })), [3, 4])
      assert.deepStrictEqual(ns(yield* audit.list({ limit: 2 })), [3, 4])
      assert.deepStrictEqual(ns(yield* audit.list({ limit: 0 })), [])
      assert.deepStrictEqual(ns(yield* audit.list({ limit: 9 })), [0, 1, 2, 3, 4])
      assert.deepStrictEqual(ns(yield* audit.list({ tool: "submit", status: "ok", limit: 1 })), [3])
      assert.deepStrictEqual(ns(yield* audit.list({ status: "timeout" })), [])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("list on a log that was never written is empty", () =>
    Effect.gen(function* () {
      const { audit } = yield* openLog
      assert.deepStrictEqual(yield* audit.list({}), [])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("prune keepLast keeps the newest, rewrites their files and removes emptied ones", () =>
    Effect.gen(function* () {
      const { audit, dir, fs, path } = yield* openLog
      const entries = [
        entryAt(Day1, "t", "ok", 0),
        entryAt(Day1 + Hour, "t", "ok", 1),
        entryAt(Day2, "t", "ok", 2),
        entryAt(Day2 + Hour, "t", "ok", 3),
        entryAt(Day3, "t", "ok", 4)
      ]
      for (const entry of entries) yield* audit.append(entry)

      assert.deepStrictEqual(yield* audit.prune({ keepLast: 2 }), { removed: 3, kept: 2 })
      assert.deepStrictEqual(yield* dayFiles(fs, dir), ["2025-06-02.jsonl", "2025-06-03.jsonl"])
      assert.deepStrictEqual(yield* linesOf(fs, path.join(dir, "2025-06-02.jsonl")), [entries[3]])
      assert.deepStrictEqual(yield* linesOf(fs, path.join(dir, "2025-06-03.jsonl")), [entries[4]])
      for (const name of yield* dayFiles(fs, dir))
        assert.strictEqual((yield* fs.stat(path.join(dir, name))).mode & 0o777, 0o600, name)
      assert.deepStrictEqual(yield* audit.list({}), entries.slice(3))
      assert.deepStrictEqual(
        (yield* fs.readDirectory(dir)).filter((name) => name.startsWith(".tmp")),
        [],
        "no temp files left"
      )

      assert.deepStrictEqual(yield* audit.prune({ keepLast: 5 }), { removed: 0, kept: 2 })
      assert.deepStrictEqual(yield* audit.prune({ keepLast: 0 }), { removed: 2, kept: 0 })
      assert.deepStrictEqual(yield* dayFiles(fs, dir), [])
      assert.deepStrictEqual(yield* audit.list({}), [])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("prune olderThanMillis removes entries older than now minus the age", () =>
    Effect.gen(function* () {
      const { audit, dir, fs } = yield* openLog
      // Entries written by real calls, with the test clock placing them on different days.
      const times = [Day1, Day1 + 2 * Hour, Day2, Day2 + 12 * Hour, Day3]
      for (const [n, at] of times.entries()) {
        yield* TestClock.setTime(at)
        yield* audit.append(entryAt(yield* Clock.currentTimeMillis, "t", "ok", n))
      }
      yield* TestClock.setTime(Day3 + Hour)

      // Older than 30 h: everything before Day2 04:00 goes, so all of Day1 and its file.
      assert.deepStrictEqual(yield* audit.prune({ olderThanMillis: 30 * Hour }), { removed: 2, kept: 3 })
      assert.deepStrictEqual(yield* dayFiles(fs, dir), ["2025-06-02.jsonl", "2025-06-03.jsonl"])
      // Older than 13 h: Day2 09:00 goes; Day2 21:00, exactly at the boundary, stays.
      assert.deepStrictEqual(yield* audit.prune({ olderThanMillis: 13 * Hour }), { removed: 1, kept: 2 })
      assert.deepStrictEqual(
        (yield* audit.list({})).map((entry) => entry.duration_ms),
        [3, 4]
      )
      assert.deepStrictEqual(yield* dayFiles(fs, dir), ["2025-06-02.jsonl", "2025-06-03.jsonl"])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("a torn trailing line is skipped by list", () =>
    Effect.gen(function* () {
      const { audit, dir, fs, path } = yield* openLog
      const first = entryAt(Day1, "t", "ok", 1)
      yield* audit.append(first)
      const file = path.join(dir, "2025-06-01.jsonl")
      const torn = JSON.stringify(entryAt(Day1 + Hour, "t", "ok", 2)).slice(0, 40)
      yield* fs.writeFileString(file, torn, { flag: "a" })
      assert.deepStrictEqual(yield* audit.list({}), [first])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  // A crash mid-append leaves a line without its newline; the next append must still be readable.
  it.scoped("an entry appended after a torn trailing line is not lost", () =>
    Effect.gen(function* () {
      const { audit, dir, fs, path } = yield* openLog
      const first = entryAt(Day1, "t", "ok", 1)
      yield* audit.append(first)
      const file = path.join(dir, "2025-06-01.jsonl")
      yield* fs.writeFileString(file, JSON.stringify(entryAt(Day1, "t", "ok", 2)).slice(0, 40), { flag: "a" })
      const next = entryAt(Day1 + Hour, "t", "ok", 3)
      yield* audit.append(next)
      assert.deepStrictEqual(yield* audit.list({}), [first, next])
    }).pipe(Effect.provide(nodeContextLayer))
  )

  // The lock directory inside it is normally made first; an append must not rely on that.
  it.scoped("an append makes a missing log directory (0700) and its day file (0600)", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const dir = path.join(yield* tempDir, "nested", "audit")
      const entry = entryAt(Day1, "t", "ok", 1)
      const appender = yield* makeAuditAppender({ fs, path, dir, locked: (body) => body })
      yield* appender.append(dayFileOf(entry), entryLine(entry), "synced")
      assert.strictEqual((yield* fs.stat(dir)).mode & 0o777, 0o700)
      const file = path.join(dir, "2025-06-01.jsonl")
      assert.strictEqual((yield* fs.stat(file)).mode & 0o777, 0o600)
      assert.deepStrictEqual(yield* linesOf(fs, file), [entry])
    }).pipe(Effect.provide(nodeContextLayer))
  )
})
