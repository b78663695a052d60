/**
 * The summary index of a file store (docs/file-store.md, "The summary index"): what `list` and
 * `counts` read instead of every record.
 *
 *   index/journal/<boot>-<pid>-<token>-<seq>.jsonl  one store's own log: an entry per record write
 *   index/summary/manifest.json                     the snapshot: its segments, with the count of
 *                                                   each state, and how far each journal is folded
 *   index/summary/seg-<token>.jsonl                 a segment: the entries of one range of
 *                                                   submission order, newest first
 *   index/summary/stale                             a journal append failed: rebuild before use
 *   index/summary/stale-<pid>-<token>               the flag, claimed by a rebuild at work
 *
 * (The lines and names of these files are in summaryFormat.ts.)
 *
 * An entry is a task's summary at one revision of its record (the count of writes the record has
 * had, kept in the record: `records.ts`). Every write of a record appends its entry to the
 * writer's journal once the record is written, so the journals hold every change since the
 * snapshot; of the entries of a task, the highest revision is the current one, wherever it is.
 * Journals are per writer so that no two processes append to one file, and nothing needs a lock
 * to write. Like the markers, the index is a hint: never fsynced, rebuilt from the records after a
 * reboot (with the markers), by `check`, and by whoever finds it missing, damaged or stale.
 *
 * A reader takes the manifest, the journals past their folded offsets (the tail) and, for each
 * task of the tail, its entry in the one segment its submission key falls in; so the first page of
 * `list` reads the manifest, the tail and the newest segment or two, and `counts` the manifest and
 * the tail. Once a tail grows past `compactAtEntries`, a reader or a writer folds it into the
 * segments (under the root's `index` lock, skipped when another process holds it).
 */
import { Data, Effect, Either, ExecutionStrategy, Exit, Option, Scope } from "effect"
import { decodeCursor, encodeCursor } from "../../domain/submission.js"
import type { TaskState, TaskSummary } from "../../domain/Task.js"
import { TaskStates } from "../../domain/Task.js"
import type { InvalidInput, LockTimeout, StorageError } from "../../domain/errors.js"
import type { Host } from "../../services/Host.js"
import type { Lock } from "../../services/Lock.js"
import type { ListRequest, TaskPage } from "../../services/TaskStore.js"
import type { Files, Paths } from "../../platform/durable.js"
import {
  ensureDirectory,
  FileMode,
  fromUtf8,
  isNotFound,
  listDirectory,
  readIfExists,
  removeIfExists,
  tempName,
  toStorageError,
  touch,
  utf8,
  writeHint
} from "../../platform/durable.js"
import { emptyStateCounts, listLimit, summaryFilter } from "../shared.js"
import type { Layout } from "./layout.js"
import { bootTagOf } from "./layout.js"
import type { IndexEntry, JournalName, JournalTail, Key, Manifest, SegmentInfo } from "./summaryFormat.js"
import {
  bySegment,
  compareKeys,
  decodeEntry,
  decodeManifest,
  encodeEntry,
  entryFinder,
  entryOf,
  findEntry,
  infoOf,
  keyOf,
  lineNeedle,
  linePrefilter,
  linesOf,
  linesWith,
  newestFirst,
  parseJournalName,
  pidOfStaleClaim,
  providerKey,
  segmentOf,
  staleClaimName
} from "./summaryFormat.js"
import type { Scan } from "./scan.js"

/** The sizes the index keeps to; tests make them small, to reach every path with a few tasks. */
export interface SummaryIndexTuning {
  /** Entries of each part when a segment splits; a segment splits past twice this. */
  readonly segmentEntries: number
  /** A tail longer than this is folded into the segments before it is read again. */
  readonly compactAtEntries: number
  /** So is a tail spread over more journals than this (one-shot CLI processes leave one each). */
  readonly compactAtJournals: number
  /** A writer starts a new journal once its own reaches this size. */
  readonly journalRotateBytes: number
}

export const DefaultSummaryIndexTuning: SummaryIndexTuning = {
  segmentEntries: 1_000,
  compactAtEntries: 1_000,
  compactAtJournals: 64,
  journalRotateBytes: 4 * 1024 * 1024
}
/** What a collection's `remove` answers, and the tasks it removed. */
export interface Removal<A> {
  readonly answer: A
  readonly removed: ReadonlyArray<{ readonly created_at: string; readonly task_id: string }>
}

/** The root lock that serialises compactions and rebuilds. */
export const IndexLockKey = "index"

export interface SummaryIndexDeps {
  readonly fs: Files
  readonly path: Paths
  readonly host: Host["Type"]
  readonly lock: Lock["Type"]
  readonly layout: Layout
  /** Every record with its revision, read after the caller's moment: for a rebuild. */
  readonly scan: Effect.Effect<Scan, StorageError>
  readonly tuning?: Partial<SummaryIndexTuning> | undefined
}

/** What a reader saw: the snapshot, resolved against the tail. */
interface View {
  readonly manifest: Manifest
  /** The current entry of every task the tail changed since the snapshot. */
  readonly changed: ReadonlyMap<string, IndexEntry>
  /** Their entries in the snapshot, now outdated: counted out, and skipped in a segment. */
  readonly outdated: ReadonlyMap<string, IndexEntry>
  /** Segment texts read so far. */
  readonly segment: (file: string) => Effect.Effect<string, StorageError | Damaged>
}

/**
 * The index disagrees with itself: a line that is not an entry ("damaged": rebuilt), or a
 * segment its manifest names that is gone ("missing": a compaction replaced it meanwhile).
 */
class Damaged extends Data.TaggedError("Damaged")<{
  readonly message: string
  readonly kind: "damaged" | "missing"
}> {}

export const makeSummaryIndex = (deps: SummaryIndexDeps) =>
  Effect.gen(function* () {
    const { fs, path, host, lock, layout } = deps
    const { segmentEntries, compactAtEntries, compactAtJournals, journalRotateBytes } = {
      ...DefaultSummaryIndexTuning,
      ...deps.tuning
    }
    const journalDir = layout.journal
    const summaryDir = layout.summary
    const manifestFile = path.join(summaryDir, "manifest.json")
    const staleFlag = path.join(summaryDir, "stale")
    const segmentPath = (file: string) => path.join(summaryDir, file)
    const boot = bootTagOf(host.bootId)
    const scope = yield* Effect.scope

    const readText = (file: string) => Effect.map(readIfExists(fs, file), Option.map(fromUtf8))

    const writeFileHint = (file: string, text: string) =>
      Effect.flatMap(host.token, (token) => writeHint(fs, path, file, tempName(host.pid, token), utf8(text)))

    const newSegmentFile = (entries: ReadonlyArray<IndexEntry>, lower: Key | null) =>
      Effect.gen(function* () {
        const file = `seg-${yield* host.token}.jsonl`
        yield* writeFileHint(segmentPath(file), entries.map((entry) => `${encodeEntry(entry)}\n`).join(""))
        return infoOf(file, lower, entries)
      })

    /**
     * Entries (newest first) as segments: one, or even parts of at least `segmentEntries` when there
     * are more than twice that; each part's lower bound is the next part's newest key, the last
     * keeps `lower`.
     */
    const writeSegments = (sorted: ReadonlyArray<IndexEntry>, lower: Key | null) =>
      Effect.gen(function* () {
        const parts: Array<ReadonlyArray<IndexEntry>> = []
        // Even parts of at least `segmentEntries`, their sizes at most one apart (2,001 entries
        // make two of 1,001 and 1,000, never a third of one).
        const count = sorted.length <= 2 * segmentEntries ? 1 : Math.floor(sorted.length / segmentEntries)
        for (let part = 0; part < count; part++)
          parts.push(
            sorted.slice(
              Math.floor((part * sorted.length) / count),
              Math.floor(((part + 1) * sorted.length) / count)
            )
          )
        const infos: Array<SegmentInfo> = []
        for (const [n, part] of parts.entries()) {
          const next = parts[n + 1]?.[0]
          infos.push(yield* newSegmentFile(part, next === undefined ? lower : keyOf(next)))
        }
        return infos
      })

    /** The manifest, with its text: a reader compares it again at the end of its read. */
    const readManifest: Effect.Effect<
      Option.Option<{ readonly manifest: Manifest; readonly text: string }> | "damaged",
      StorageError
    > = Effect.map(
      readText(manifestFile),
      Option.match({
        onNone: () => Option.none(),
        onSome: (text) =>
          Either.match(decodeManifest(text), {
            onLeft: () => "damaged" as const,
            onRight: (manifest) => Option.some({ manifest, text })
          })
      })
    )

    const journals = Effect.map(listDirectory(fs, journalDir), (names) =>
      names.flatMap((name) => {
        const parsed = parseJournalName(name)
        return parsed === undefined ? [] : [parsed]
      })
    )

    /**
     * The complete lines of a journal from `from` on. An offset that falls inside a line (a
     * rebuild takes each journal's size while its writer may be mid-append) skips that line: its
     * change was in the record before it was appended, so the rebuild's scan has it.
     */
    const readJournal = (name: string, from: number): Effect.Effect<JournalTail, StorageError | Damaged> =>
      Effect.scoped(
        Effect.gen(function* () {
          const file = path.join(journalDir, name)
          const opened = yield* fs.open(file, { flag: "r" }).pipe(
            Effect.map(Option.some),
            Effect.catchIf(isNotFound, () => Effect.succeedNone),
            Effect.mapError(toStorageError("open", file))
          )
          if (Option.isNone(opened)) return { entries: [], end: from, size: from }
          const handle = opened.value
          const size = Number((yield* handle.stat.pipe(Effect.mapError(toStorageError("stat", file)))).size)
          if (size <= from) return { entries: [], end: from, size }
          const start = from === 0 ? 0 : from - 1
          yield* handle.seek(start, "start")
          const bytes = Option.getOrElse(
            yield* handle.readAlloc(size - start).pipe(Effect.mapError(toStorageError("read", file))),
            () => new Uint8Array(0)
          )
          // Newlines are single bytes in UTF-8, never inside a character: cut on the bytes.
          let position = 0
          if (from > 0) {
            const first = bytes.indexOf(0x0a)
            if (first === -1) return { entries: [], end: from, size }
            position = first + 1
          }
          const entries: Array<IndexEntry> = []
          for (;;) {
            const newline = bytes.indexOf(0x0a, position)
            if (newline === -1) break
            const entry = decodeEntry(fromUtf8(bytes.subarray(position, newline)))
            if (entry === undefined)
              return yield* new Damaged({ message: `${file}: a line is not an entry`, kind: "damaged" })
            entries.push(entry)
            position = newline + 1
          }
          return { entries, end: start + position, size }
        })
      )

    /** The journals past the manifest's covers: the newest entry of each task, and the new covers. */
    const readTail = (manifest: Manifest) =>
      Effect.gen(function* () {
        const found = yield* journals
        const latest = new Map<string, IndexEntry>()
        const covers: Record<string, number> = {}
        let count = 0
        let pending = 0
        for (const journal of found) {
          const from = manifest.covers[journal.name] ?? 0
          // A journal folded to its end (most of them) costs one stat, not an open and a read.
          const size = yield* sizeOf(path.join(journalDir, journal.name))
          const tail =
            size <= from ? { entries: [], end: from, size } : yield* readJournal(journal.name, from)
          covers[journal.name] = tail.end
          count += tail.entries.length
          if (tail.entries.length > 0) pending += 1
          for (const entry of tail.entries) {
            const known = latest.get(entry.task_id)
            if (known === undefined || entry.revision > known.revision) latest.set(entry.task_id, entry)
          }
        }
        return { latest, covers, count, pending, found }
      })

    const segmentReader = () => {
      const texts = new Map<string, string>()
      return (file: string): Effect.Effect<string, StorageError | Damaged> => {
        const known = texts.get(file)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.flatMap(readText(segmentPath(file)), (text) => {
          if (Option.isNone(text))
            return Effect.fail(new Damaged({ message: `${segmentPath(file)} is missing`, kind: "missing" }))
          texts.set(file, text.value)
          return Effect.succeed(text.value)
        })
      }
    }

    /** The tail's entries that are newer than the snapshot's, and the snapshot's they replace. */
    const resolve = (
      manifest: Manifest,
      latest: ReadonlyMap<string, IndexEntry>,
      segment: (file: string) => Effect.Effect<string, StorageError | Damaged>
    ) =>
      Effect.gen(function* () {
        const changed = new Map<string, IndexEntry>()
        const outdated = new Map<string, IndexEntry>()
        for (const [index, group] of bySegment(manifest, latest.values())) {
          const info = manifest.segments[index]
          if (info === undefined) continue
          const text = yield* segment(info.file)
          // A few look-ups search the text; more read where each id's line starts, once.
          const find = group.length > 4 ? entryFinder(text) : (taskId: string) => findEntry(text, taskId)
          for (const entry of group) {
            const stored = find(entry.task_id)
            if (stored === "damaged")
              return yield* new Damaged({ message: `${info.file}: a line is not an entry`, kind: "damaged" })
            // A tail entry no newer than the snapshot's was folded (or rebuilt) already.
            if (stored !== undefined && stored.revision >= entry.revision) continue
            changed.set(entry.task_id, entry)
            if (stored !== undefined) outdated.set(entry.task_id, stored)
          }
        }
        return { changed, outdated }
      })

    /**
     * Fold the tail into the segments: each segment the tail touches is read, updated and
     * written anew (split when it grows past twice `segmentEntries`), then the manifest names the
     * new segments and the new covers, then every segment it does not name (those it replaced, and
     * those an interrupted compaction left) and the journals nobody will append to again (a writer
     * that is gone, or one that has moved on to a later journal) are removed.
     * Under the index lock; a reader of the old manifest that finds a segment gone reads again.
     */
    const compactBody = Effect.gen(function* () {
      const current = yield* readManifest
      if (current === "damaged" || Option.isNone(current)) return yield* rebuildFrom(deps.scan)
      const { manifest } = current.value
      const tail = yield* readTail(manifest)
      const segment = segmentReader()
      const groups = bySegment(manifest, tail.latest.values())
      const segments: Array<SegmentInfo> = []
      for (const [index, info] of manifest.segments.entries()) {
        const group = groups.get(index)
        if (group === undefined) {
          segments.push(info)
          continue
        }
        const entries = new Map<string, IndexEntry>()
        for (const line of linesOf(yield* segment(info.file))) {
          const entry = decodeEntry(line)
          if (entry === undefined)
            return yield* new Damaged({ message: `${info.file}: a line is not an entry`, kind: "damaged" })
          entries.set(entry.task_id, entry)
        }
        for (const entry of group) {
          const known = entries.get(entry.task_id)
          if (known === undefined || entry.revision > known.revision) entries.set(entry.task_id, entry)
        }
        segments.push(...(yield* writeSegments([...entries.values()].sort(newestFirst), info.lower)))
      }
      const [first, ...rest] = segments
      if (first === undefined) return
      yield* writeManifest({ version: 1, covers: tail.covers, segments: [first, ...rest] })
      yield* removeSegmentsBut([first, ...rest])
      yield* dropFinishedJournals(tail.found, tail.covers)
    })

    const writeManifest = (manifest: Manifest) => writeFileHint(manifestFile, `${JSON.stringify(manifest)}\n`)

    /**
     * Remove every segment the manifest just written does not name. Under the index lock no other
     * compaction or rebuild is writing one, and a reader only reads the segments of a manifest.
     */
    const removeSegmentsBut = (named: ReadonlyArray<SegmentInfo>) =>
      Effect.gen(function* () {
        const kept = new Set(named.map((info) => info.file))
        for (const name of yield* listDirectory(fs, summaryDir))
          if (name.startsWith("seg-") && !kept.has(name)) yield* removeIfExists(fs, segmentPath(name))
      })

    /**
     * Remove journals folded to their end whose writer will not append again: one of another
     * boot, or of a process that is gone, or one its writer has replaced by a later one.
     */
    const dropFinishedJournals = (
      found: ReadonlyArray<JournalName>,
      covers: Readonly<Record<string, number>>
    ) =>
      Effect.gen(function* () {
        const latestSeq = new Map<string, number>()
        for (const journal of found)
          latestSeq.set(journal.writer, Math.max(latestSeq.get(journal.writer) ?? 0, journal.seq))
        for (const journal of found) {
          const cover = covers[journal.name]
          if (cover === undefined) continue
          // The writer first: once it will not append again, the size it has now is final, and
          // the journal goes only if every byte of it is folded (it may have grown since it was read).
          const finished =
            journal.boot !== boot ||
            (latestSeq.get(journal.writer) ?? 0) > journal.seq ||
            !(yield* host.isAlive(journal.pid))
          if (!finished) continue
          const file = path.join(journalDir, journal.name)
          const size = yield* sizeOf(file)
          if (size === cover) yield* removeIfExists(fs, file)
        }
      })

    /** A file's size; 0 when it is gone (a journal removed by a compaction), a StorageError otherwise. */
    const sizeOf = (file: string): Effect.Effect<number, StorageError> =>
      fs.stat(file).pipe(
        Effect.map((info) => Number(info.size)),
        Effect.catchIf(isNotFound, () => Effect.succeed(0)),
        Effect.mapError(toStorageError("stat", file))
      )

    /**
     * Build the index anew from the records: each journal's size is taken first, then every
     * record read, so that whatever a journal holds past its size was written after its record,
     * which the scan may or may not have seen; the revisions settle which is current.
     */
    const rebuildFrom = (records: Effect.Effect<Scan, StorageError>) =>
      Effect.gen(function* () {
        // First the stale flag is claimed (renamed to a name of this process's): an append that
        // fails from here on makes a new one, for the next reader. The claim is removed once the
        // new manifest is in place; a rebuild that fails or is interrupted puts the flag back,
        // and one whose process dies leaves its claim, which the next open turns back into the flag.
        const claim = path.join(summaryDir, staleClaimName(host.pid, yield* host.token))
        const claimed = yield* fs.rename(staleFlag, claim).pipe(
          Effect.as(true),
          Effect.orElseSucceed(() => false)
        )
        const giveBack = claimed ? fs.rename(claim, staleFlag).pipe(Effect.ignore) : Effect.void
        return yield* Effect.onExit(
          Effect.gen(function* () {
            const found = yield* journals.pipe(Effect.orElseSucceed((): ReadonlyArray<JournalName> => []))
            const covers: Record<string, number> = {}
            for (const journal of found) {
              const size = yield* sizeOf(path.join(journalDir, journal.name)).pipe(Effect.option)
              if (Option.isSome(size)) covers[journal.name] = size.value
            }
            const scan = yield* records
            // The index is a hint: one that cannot be written now is marked stale and left for the
            // next reader, and whoever asked for the scan gets it all the same.
            const written = yield* writeRebuilt(scan, covers).pipe(
              Effect.zipRight(dropFinishedJournals(found, covers)),
              Effect.as(true),
              Effect.catchAll((error) =>
                Effect.as(Effect.logWarning(`summary index not rebuilt: ${error.message}`), false)
              )
            )
            if (written && claimed) yield* removeIfExists(fs, claim).pipe(Effect.ignore)
            if (!written) yield* touch(fs, staleFlag).pipe(Effect.ignore)
            return scan
          }),
          (exit) => (Exit.isSuccess(exit) ? Effect.void : giveBack)
        )
      })

    /**
     * Stale-flag claims of rebuilds whose process is gone (killed mid-rebuild) become the flag
     * again, so that the next reader rebuilds. Run at open: index/summary holds a few files.
     */
    const restoreAbandonedClaims = Effect.gen(function* () {
      for (const name of yield* listDirectory(fs, summaryDir)) {
        const pid = pidOfStaleClaim(name)
        if (pid === undefined || (yield* host.isAlive(pid))) continue
        yield* touch(fs, staleFlag)
        yield* removeIfExists(fs, path.join(summaryDir, name))
      }
    })

    /** Write the segments and the manifest of a rebuild, then remove every other segment. */
    const writeRebuilt = (scan: Scan, covers: Readonly<Record<string, number>>) =>
      Effect.gen(function* () {
        yield* ensureDirectory(fs, summaryDir)
        const sorted = scan.records
          .map((record) => entryOf(record, scan.revisions.get(record.task_id) ?? 0))
          .sort(newestFirst)
        const [first, ...rest] = yield* writeSegments(sorted, null)
        if (first === undefined) return
        yield* writeManifest({ version: 1, covers, segments: [first, ...rest] })
        yield* removeSegmentsBut([first, ...rest])
      })

    const underIndexLock = <A, E>(body: Effect.Effect<A, E>, waitMillis: number) =>
      lock.withLock(IndexLockKey, body, { waitMillis, ttlMillis: 600_000 })

    /**
     * Remove records and rebuild the index without them, under the index lock: a collection
     * (`FileTaskStore`'s `collect`). As in a rebuild, each journal's size is taken first and
     * every record read after; `remove` then removes what it chooses of that scan, and the lines
     * appended since the sizes were taken are folded in, but those of a removed task (its id and
     * creation time). `remove` takes each task's lock, so no line of a removed task can come
     * after it, and the new manifest covers every line that could: no reader meets one again. A
     * task submitted again under a removed one's id has another creation time and is kept.
     *
     * The stale flag is claimed first, or a claim made when there is none, and given back as the
     * flag if this fails; a process killed part way leaves its claim, which the next open turns
     * into the flag: an index that may still list removed tasks is rebuilt. What `remove` did
     * stands whether or not the index could be written.
     */
    const rebuildRemoving = <A, E>(
      remove: (scan: Scan) => Effect.Effect<Removal<A>, E>
    ): Effect.Effect<A, E | LockTimeout | StorageError> =>
      underIndexLock(
        Effect.gen(function* () {
          yield* ensureDirectory(fs, summaryDir)
          const claim = path.join(summaryDir, staleClaimName(host.pid, yield* host.token))
          const claimed = yield* fs.rename(staleFlag, claim).pipe(
            Effect.as(true),
            Effect.orElseSucceed(() => false)
          )
          if (!claimed) yield* touch(fs, claim)
          const giveBack = fs.rename(claim, staleFlag).pipe(Effect.ignore)
          return yield* Effect.onExit(
            Effect.gen(function* () {
              const found = yield* journals
              const covers: Record<string, number> = {}
              for (const journal of found)
                covers[journal.name] = yield* sizeOf(path.join(journalDir, journal.name))
              const scan = yield* deps.scan
              const { answer, removed } = yield* remove(scan)
              const written = yield* writeWithout(scan, covers, removed).pipe(
                Effect.as(true),
                Effect.catchAll((error) =>
                  Effect.as(
                    Effect.logWarning(`summary index not rebuilt after a collection: ${error.message}`),
                    false
                  )
                )
              )
              yield* written ? removeIfExists(fs, claim).pipe(Effect.ignore) : giveBack
              return answer
            }),
            (exit) => (Exit.isSuccess(exit) ? Effect.void : giveBack)
          )
        }),
        120_000
      )

    /** The index of `scan` less `removed`, with every line appended since `covers` folded in. */
    const writeWithout = (
      scan: Scan,
      covers: Readonly<Record<string, number>>,
      removed: ReadonlyArray<{ readonly created_at: string; readonly task_id: string }>
    ) =>
      Effect.gen(function* () {
        const incarnation = (entry: { readonly created_at: string; readonly task_id: string }) =>
          `${entry.created_at} ${entry.task_id}`
        const gone = new Set(removed.map(incarnation))
        const entries = new Map<string, IndexEntry>()
        for (const record of scan.records)
          if (!gone.has(incarnation(record)))
            entries.set(record.task_id, entryOf(record, scan.revisions.get(record.task_id) ?? 0))
        const found = yield* journals
        const folded: Record<string, number> = {}
        for (const journal of found) {
          const tail = yield* readJournal(journal.name, covers[journal.name] ?? 0)
          folded[journal.name] = tail.end
          for (const entry of tail.entries) {
            if (gone.has(incarnation(entry))) continue
            const known = entries.get(entry.task_id)
            if (known === undefined || entry.revision > known.revision) entries.set(entry.task_id, entry)
          }
        }
        const [first, ...rest] = yield* writeSegments([...entries.values()].sort(newestFirst), null)
        if (first === undefined) return
        yield* writeManifest({ version: 1, covers: folded, segments: [first, ...rest] })
        yield* removeSegmentsBut([first, ...rest])
        yield* dropFinishedJournals(found, folded)
      })

    /** Rebuild now, waiting for a compaction or rebuild another process is running. */
    const rebuildWith = (records: Effect.Effect<Scan, StorageError>): Effect.Effect<Scan, StorageError> =>
      underIndexLock(rebuildFrom(records), 120_000).pipe(
        // A lock that cannot be had (or made, in a root this process cannot write): the scan alone.
        Effect.catchAll(() => records)
      )
    const rebuild = rebuildWith(deps.scan)

    /**
     * A reader's rebuild: under the lock, only if the index still needs one (a reader that waited
     * for another's rebuild reads that one), and without a scan of its own when it cannot rebuild
     * (the caller answers from the records, once).
     */
    const rebuildIfNeeded: Effect.Effect<void> = underIndexLock(
      Effect.gen(function* () {
        const stale = yield* fs.exists(staleFlag).pipe(Effect.mapError(toStorageError("read", staleFlag)))
        const current = yield* readManifest
        if (!stale && current !== "damaged" && Option.isSome(current)) return
        yield* rebuildFrom(deps.scan)
      }),
      120_000
    ).pipe(
      Effect.catchAll((error) => Effect.logWarning(`summary index not rebuilt: ${error.message}`)),
      Effect.asVoid
    )

    /** Fold the tail unless another process holds the index; a failure is only logged. */
    const compact: Effect.Effect<void> = underIndexLock(compactBody, 0).pipe(
      Effect.asVoid,
      Effect.catchTag("LockTimeout", () => Effect.void),
      Effect.catchAll((error) => Effect.logWarning(`summary index not compacted: ${error.message}`))
    )

    /**
     * The index as it stands: the manifest, the tail resolved against it. Rebuilt first when
     * it is missing, damaged or marked stale; compacted first when its tail has grown long.
     * None when it could not be read consistently: the caller answers from the records.
     */
    const view: Effect.Effect<Option.Option<View>, StorageError> = Effect.gen(function* () {
      let rebuilt = false
      let compacted = false
      let missing = 0
      for (let attempt = 0; attempt < 5; attempt++) {
        const stale = yield* fs.exists(staleFlag).pipe(Effect.mapError(toStorageError("read", staleFlag)))
        const current = yield* readManifest
        if (stale || current === "damaged" || Option.isNone(current)) {
          // Rebuilt once already and still not readable: the records answer.
          if (rebuilt) return Option.none()
          yield* rebuildIfNeeded
          rebuilt = true
          continue
        }
        const { manifest, text } = current.value
        const segment = segmentReader()
        const read = yield* Effect.either(
          Effect.gen(function* () {
            const tail = yield* readTail(manifest)
            if (!compacted && (tail.count > compactAtEntries || tail.pending > compactAtJournals))
              return "compact" as const
            const { changed, outdated } = yield* resolve(manifest, tail.latest, segment)
            // A compaction that ended meanwhile may have removed a journal this read then missed,
            // folded into a snapshot it did not read: a manifest that changed means read again.
            const after = yield* readText(manifestFile)
            if (Option.getOrUndefined(after) !== text) return "changed" as const
            return { manifest, changed, outdated, segment }
          })
        )
        if (Either.isLeft(read)) {
          if (read.left._tag === "StorageError") return yield* read.left
          yield* markIfDamaged(read.left)
          // A segment missing once is a compaction that replaced it meanwhile; missing again and
          // again, it is gone (removed by hand): the index is rebuilt.
          if (read.left.kind === "missing" && ++missing >= 3) yield* touch(fs, staleFlag).pipe(Effect.ignore)
          continue
        }
        if (read.right === "changed") continue
        if (read.right === "compact") {
          yield* compact
          compacted = true
          continue
        }
        return Option.some(read.right)
      }
      return Option.none()
    })

    /** A damaged index is marked stale, so that the next read rebuilds it; a missing segment is not. */
    const markIfDamaged = (error: Damaged) =>
      error.kind === "damaged" ? touch(fs, staleFlag).pipe(Effect.ignore) : Effect.void

    const counts = (v: View): Record<TaskState, number> => {
      const states = emptyStateCounts()
      for (const info of v.manifest.segments)
        for (const state of TaskStates) states[state] += info.states[state] ?? 0
      for (const entry of v.outdated.values()) states[entry.state] -= 1
      for (const entry of v.changed.values()) states[entry.state] += 1
      return states
    }

    /**
     * A page: segments newest first, each skipped when its counts show it cannot hold a match
     * or the cursor is past it, until the page (and one more, to know a next page exists) is
     * full; then merged with the tail's matches.
     */
    const page = (v: View, request: ListRequest, after: Key | undefined) =>
      Effect.gen(function* () {
        const limit = listLimit(request)
        const matches = summaryFilter(request)
        const prefilter = linePrefilter(request.search)
        const needle = lineNeedle(request)
        const olderThanCursor = (entry: IndexEntry) =>
          after === undefined || compareKeys(keyOf(entry), after) < 0
        const found: Array<IndexEntry> = []
        const tail = [...v.changed.values()].filter((entry) => matches(entry) && olderThanCursor(entry))
        // A segment's counts include the entries the tail has replaced: those are taken off, so
        // that a segment whose only tasks of a state have moved on is skipped too.
        const replacedState = new Map<number, number>()
        const replacedProvider = new Map<number, number>()
        for (const entry of v.outdated.values()) {
          const index = segmentOf(v.manifest.segments, keyOf(entry))
          if (entry.state === request.state) replacedState.set(index, (replacedState.get(index) ?? 0) + 1)
          if (providerKey(entry) === request.provider)
            replacedProvider.set(index, (replacedProvider.get(index) ?? 0) + 1)
        }
        scan: for (const [index, info] of v.manifest.segments.entries()) {
          if (
            request.state !== undefined &&
            (info.states[request.state] ?? 0) - (replacedState.get(index) ?? 0) <= 0
          )
            continue
          if (
            request.provider !== undefined &&
            (info.providers[request.provider] ?? 0) - (replacedProvider.get(index) ?? 0) <= 0
          )
            continue
          // Every entry sorts after `lower`; past the cursor is before it.
          if (after !== undefined && info.lower !== null && compareKeys(info.lower, after) >= 0) continue
          for (const line of linesWith(yield* v.segment(info.file), needle)) {
            if (!prefilter(line)) continue
            const entry = decodeEntry(line)
            if (entry === undefined)
              return yield* new Damaged({ message: `${info.file}: a line is not an entry`, kind: "damaged" })
            if (v.changed.has(entry.task_id) || !olderThanCursor(entry) || !matches(entry)) continue
            found.push(entry)
            if (found.length > limit) break scan
          }
        }
        const sorted = [...found, ...tail].sort(newestFirst)
        const tasks = sorted.slice(0, limit)
        const last = tasks[tasks.length - 1]
        const summaries: Array<TaskSummary> = tasks.map(({ revision: _revision, ...summary }) => summary)
        return {
          tasks: summaries,
          next_cursor: sorted.length > limit && last ? encodeCursor(last.created_at, last.task_id) : null
        } satisfies TaskPage
      })

    /**
     * `list` from the index; `fallback` (a page of the records) when the index cannot be read
     * consistently. A bad cursor is refused before anything is read.
     */
    const list = (
      request: ListRequest,
      fallback: Effect.Effect<TaskPage, InvalidInput | StorageError>
    ): Effect.Effect<TaskPage, InvalidInput | StorageError> =>
      Effect.gen(function* () {
        const after = request.cursor === undefined ? undefined : yield* decodeCursor(request.cursor)
        for (let attempt = 0; attempt < 3; attempt++) {
          const v = yield* viewOrNone
          if (Option.isNone(v)) break
          const answer = yield* Effect.either(page(v.value, request, after))
          if (Either.isRight(answer)) return answer.right
          if (answer.left._tag === "StorageError") {
            yield* Effect.logWarning(`summary index not read, the records answer: ${answer.left.message}`)
            break
          }
          yield* markIfDamaged(answer.left)
        }
        return yield* fallback
      })

    const countStates = (
      fallback: Effect.Effect<Readonly<Record<TaskState, number>>, StorageError>
    ): Effect.Effect<Readonly<Record<TaskState, number>>, StorageError> =>
      Effect.flatMap(
        viewOrNone,
        Option.match({ onNone: () => fallback, onSome: (v) => Effect.succeed(counts(v)) })
      )

    /**
     * `view`, or None when the index cannot be read (its directories gone, a file where one
     * should be): the records answer then, as they do when the index cannot be read consistently.
     */
    const viewOrNone: Effect.Effect<Option.Option<View>> = view.pipe(
      Effect.catchAll((error) =>
        Effect.as(
          Effect.logWarning(`summary index not read, the records answer: ${error.message}`),
          Option.none()
        )
      )
    )

    /**
     * The writer of this store's journals: each entry one append of one line to a file only
     * this store writes, opened on first use and kept open; a new file past `journalRotateBytes`.
     * Every `compactAtEntries` appends it folds the tail, in the background. An append that
     * fails marks the index stale (the next reader rebuilds it) and never fails the write whose
     * entry it is: the record is the truth, and it is written.
     */
    const writerToken = yield* host.token
    const semaphore = yield* Effect.makeSemaphore(1)
    let journal:
      | {
          readonly file: Effect.Effect.Success<ReturnType<Files["open"]>>
          readonly scope: Scope.CloseableScope
          size: number
        }
      | undefined
    let seq = 0
    let appended = 0

    const openJournal = Effect.gen(function* () {
      if (journal !== undefined && journal.size < journalRotateBytes) return journal
      if (journal !== undefined) yield* Scope.close(journal.scope, Exit.void)
      seq += 1
      // The directory is made again if it went missing (its creation is once a journal, not once a line).
      yield* ensureDirectory(fs, journalDir)
      const name = `${boot}-${host.pid}-${writerToken}-${String(seq).padStart(6, "0")}.jsonl`
      const file = path.join(journalDir, name)
      const fileScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
      const handle = yield* Scope.extend(fs.open(file, { flag: "ax", mode: FileMode }), fileScope).pipe(
        Effect.mapError(toStorageError("create", file)),
        Effect.tapError(() => Scope.close(fileScope, Exit.void))
      )
      journal = { file: handle, scope: fileScope, size: 0 }
      return journal
    })

    const append = (entry: IndexEntry): Effect.Effect<void> =>
      semaphore
        .withPermits(1)(
          Effect.gen(function* () {
            const open = yield* openJournal
            const bytes = utf8(`${encodeEntry(entry)}\n`)
            // Given up while the permit is held: no other append can come after a partial line.
            yield* open.file.writeAll(bytes).pipe(
              Effect.mapError(toStorageError("write", journalDir)),
              Effect.tapError(() => abandonJournal)
            )
            open.size += bytes.length
            appended += 1
            return appended % compactAtEntries === 0
          })
        )
        .pipe(
          Effect.flatMap((due) => (due ? Effect.asVoid(Effect.forkIn(compact, scope)) : Effect.void)),
          Effect.catchAll((error) =>
            Effect.zipRight(
              Effect.logWarning(
                `summary index entry not written (the index will be rebuilt): ${error.message}`
              ),
              touch(fs, staleFlag).pipe(Effect.ignore)
            )
          )
        )

    /**
     * After a failed append the journal may end in part of a line: nothing more is appended to
     * it (a line written after the part would be read as one damaged line), the next append
     * starts the writer's next journal.
     */
    const abandonJournal = Effect.suspend(() => {
      const abandoned = journal
      journal = undefined
      return abandoned === undefined ? Effect.void : Scope.close(abandoned.scope, Exit.void)
    })

    return {
      append,
      list,
      counts: countStates,
      /** Rebuild from the records and return the scan it read: `check`'s way of repairing. */
      rebuild,
      /** `rebuild` from the given scan: after a reboot, before the store is open. */
      rebuildWith,
      /** Remove records and rebuild without them: a collection. */
      rebuildRemoving,
      /** For tests and benchmarks: fold the tail now. */
      compact,
      /** At open: the stale flag back from rebuilds whose process died. */
      restoreAbandonedClaims
    }
  })
