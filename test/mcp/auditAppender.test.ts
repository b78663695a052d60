/**
 * The audit log's appender (src/mcp/auditAppender.ts) on a real directory, through the faulty
 * FileSystem: appends that arrive together share a write and an fsync; a `written` append
 * returns before its fsync and a `synced` one after; the day file kept open is given up when a
 * prune replaces or removes it, a link is planted over it, or its fsync fails; an interrupted
 * caller's entry is still written; closing the layer waits for the fsync in flight.
 */
import { Path } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Context, Deferred, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { readFileSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { isoTime } from "../../src/domain/Task.js"
import type { AuditEntry } from "../../src/domain/audit.js"
import { auditLogLayer } from "../../src/mcp/auditLayer.js"
import { AuditLog } from "../../src/services/AuditLog.js"
import { Host } from "../../src/services/Host.js"
import type { Entry } from "../support/FaultyFileSystem.js"
import * as FaultyFileSystem from "../support/FaultyFileSystem.js"
import { FaultPlan } from "../support/FaultyFileSystem.js"
import { tempDir } from "../support/stores.js"

const Day = Date.UTC(2025, 5, 1, 9)
const DayFile = "2025-06-01.jsonl"

const entry = (n: number): AuditEntry => ({
  time: isoTime(Day + n),
  server: "srv",
  tool: "read",
  status: "ok",
  duration_ms: n,
  arguments: { n },
  error: null
})

/** An audit log over `<temp>/audit` on the faulty FileSystem, built in `scope`. */
const logIn = (scope: Scope.Scope) =>
  Effect.gen(function* () {
    const dir = join(yield* tempDir, "audit")
    const files = yield* Layer.buildWithScope(FaultyFileSystem.layer, scope)
    const context = yield* Layer.buildWithScope(
      auditLogLayer(dir).pipe(
        Layer.provide(Host.layerTest({})),
        Layer.provide(Layer.merge(Layer.succeedContext(files), Path.layer))
      ),
      scope
    )
    const plan = Context.get(files, FaultPlan)
    yield* plan.arm(FaultyFileSystem.None)
    return { audit: Context.get(context, AuditLog), plan, dir, file: join(dir, DayFile) }
  })

const openLog = Effect.flatMap(Effect.scope, logIn)

/** The day file's lines, decoded. */
const lines = (file: string): ReadonlyArray<unknown> =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line): unknown => JSON.parse(line))

const onDayFile = (journal: ReadonlyArray<Entry>, kind: Entry["kind"]) =>
  journal.filter((call) => call.kind === kind && call.path.endsWith(DayFile)).length

describe("the audit log's appender", () => {
  it.scopedLive("appends that arrive during a batch share the next batch's one write and one fsync", () =>
    Effect.gen(function* () {
      const { audit, plan, file } = yield* openLog
      const hold = yield* plan.holdAt("sync", 1)
      const first = yield* Effect.fork(audit.append(entry(0)))
      yield* Deferred.await(hold.reached)
      const rest = yield* Effect.fork(
        Effect.all(
          [1, 2, 3, 4, 5, 6, 7].map((n) => audit.append(entry(n))),
          { concurrency: "unbounded" }
        )
      )
      // Give the seven every chance to start a batch of their own while the first one's fsync waits.
      yield* Effect.sleep("20 millis")
      assert.strictEqual(onDayFile(yield* plan.journal, "write"), 1, "the seven wait for the fsync")
      yield* Deferred.succeed(hold.release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(rest)
      const journal = yield* plan.journal
      assert.strictEqual(onDayFile(journal, "write"), 2, "two batches, one write each")
      assert.strictEqual(onDayFile(journal, "sync"), 2, "two batches, one fsync each")
      assert.deepStrictEqual(lines(file), [0, 1, 2, 3, 4, 5, 6, 7].map(entry))
    })
  )

  it.scopedLive("a written append returns before its fsync; a synced one only after", () =>
    Effect.gen(function* () {
      const { audit, plan, file } = yield* openLog
      const hold = yield* plan.holdAt("sync", 1)
      yield* audit.append(entry(0), { durability: "written" })
      yield* Deferred.await(hold.reached)
      assert.deepStrictEqual(lines(file), [entry(0)], "in the file, its fsync still held")
      const synced = yield* Effect.fork(audit.append(entry(1)))
      yield* Effect.sleep("20 millis")
      assert.isNull(synced.unsafePoll(), "a synced append waits for the fsyncs before it")
      yield* Deferred.succeed(hold.release, undefined)
      yield* Fiber.join(synced)
      assert.deepStrictEqual(lines(file), [entry(0), entry(1)])
    })
  )

  it.scopedLive(
    "a failed fsync fails the synced appends it carried; the next append opens the file afresh",
    () =>
      Effect.gen(function* () {
        const { audit, plan, file } = yield* openLog
        yield* audit.append(entry(0))
        yield* plan.arm({ _tag: "Fail", operation: "sync", nth: 1, errno: "EIO" })
        const failed = yield* Effect.flip(audit.append(entry(1)))
        assert.strictEqual(failed._tag, "StorageError")
        assert.match(failed.message, /fsync/)
        yield* plan.arm(FaultyFileSystem.None)
        yield* audit.append(entry(2))
        const journal = yield* plan.journal
        assert.strictEqual(
          journal.filter((call) => call.method === "open" && call.path === file).length,
          1,
          "opened again after the failure"
        )
        assert.deepStrictEqual(lines(file).slice(-1), [entry(2)])
      })
  )

  it.scopedLive(
    "a day file replaced (another process's prune) or removed does not swallow later entries",
    () =>
      Effect.gen(function* () {
        const { audit, file } = yield* openLog
        yield* audit.append(entry(0))
        yield* audit.append(entry(1))
        // What a prune elsewhere does: write the kept entries to a new file and rename it over.
        writeFileSync(`${file}.new`, `${JSON.stringify(entry(1))}\n`, { mode: 0o600 })
        renameSync(`${file}.new`, file)
        yield* audit.append(entry(2))
        assert.deepStrictEqual(lines(file), [entry(1), entry(2)])
        unlinkSync(file)
        yield* audit.append(entry(3))
        assert.deepStrictEqual(lines(file), [entry(3)])
        assert.deepStrictEqual(yield* audit.list({}), [entry(3)])
      })
  )

  it.scopedLive("a prune in this process between appends keeps every later entry", () =>
    Effect.gen(function* () {
      const { audit, file } = yield* openLog
      for (const n of [0, 1, 2]) yield* audit.append(entry(n))
      assert.deepStrictEqual(yield* audit.prune({ keepLast: 1 }), { removed: 2, kept: 1 })
      yield* audit.append(entry(3))
      assert.deepStrictEqual(lines(file), [entry(2), entry(3)])
    })
  )

  it.scopedLive("a symbolic link planted over the open day file is refused, and its target untouched", () =>
    Effect.gen(function* () {
      const { audit, dir, file } = yield* openLog
      yield* audit.append(entry(0))
      const target = join(dir, "..", "elsewhere")
      writeFileSync(target, "")
      symlinkSync(target, `${file}.link`)
      renameSync(`${file}.link`, file)
      const refused = yield* Effect.flip(audit.append(entry(1)))
      assert.match(refused.message, /symbolic link/)
      assert.strictEqual(readFileSync(target, "utf8"), "")
    })
  )

  it.scopedLive("a caller interrupted while its batch runs still has its entry written and fsynced", () =>
    Effect.gen(function* () {
      const { audit, plan, file } = yield* openLog
      const hold = yield* plan.holdAt("sync", 1)
      const caller = yield* Effect.fork(audit.append(entry(0)))
      yield* Deferred.await(hold.reached)
      yield* Fiber.interrupt(caller)
      yield* Deferred.succeed(hold.release, undefined)
      yield* audit.append(entry(1))
      assert.deepStrictEqual(lines(file), [entry(0), entry(1)])
      assert.strictEqual(onDayFile(yield* plan.journal, "sync"), 2)
    })
  )

  it.scopedLive("closing the layer waits for the fsync of a written entry", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const { audit, plan } = yield* logIn(scope)
      const hold = yield* plan.holdAt("sync", 1)
      yield* audit.append(entry(0), { durability: "written" })
      yield* Deferred.await(hold.reached)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* Effect.sleep("20 millis")
      assert.isNull(closing.unsafePoll(), "the layer stays open while the fsync runs")
      yield* Deferred.succeed(hold.release, undefined)
      yield* Fiber.join(closing)
      assert.isAtLeast(onDayFile(yield* plan.journal, "sync"), 1)
    })
  )

  it.scopedLive("an entry appended after a line torn by another writer starts on a line of its own", () =>
    Effect.gen(function* () {
      const { audit, file } = yield* openLog
      yield* audit.append(entry(0))
      writeFileSync(file, JSON.stringify(entry(1)).slice(0, 30), { flag: "a" })
      yield* audit.append(entry(2))
      assert.deepStrictEqual(yield* audit.list({}), [entry(0), entry(2)])
    })
  )
})
