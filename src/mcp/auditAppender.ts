/**
 * The audit log's writer, one per file layer (so one per server process): it appends entries to
 * the day files, and appends that arrive together share the work (group commit).
 *
 * - Entries that arrive while a batch is being written wait for the next batch. A batch takes the
 *   `audit` lock once, writes each day file's lines with one write, releases the lock, then
 *   fsyncs: one lock and one fsync however many calls it carries.
 * - The day file stays open between batches. Under the lock, before each write, its name is
 *   checked to still be the open file (by inode): a prune, in this process or another, replaces
 *   or removes the file, and the next batch opens the name again (refusing a symbolic link).
 * - A torn last line (a writer killed mid-append) never swallows an entry: a write that finds the
 *   file not ending in a newline starts with one.
 * - Durability is per entry: a `synced` append returns once its batch is fsynced (and the
 *   directory, when the batch's file may be new); a `written` append returns once its line is in
 *   the file, before the fsync that follows at once: a crash of the process can no longer drop
 *   it, power loss can until that fsync ends.
 * - A batch runs to its end in a fiber of its own, so an interrupted caller never cuts it short
 *   for the others (its entry is still written); closing the layer waits for the batch in flight.
 */
import type { FileSystem, Path } from "@effect/platform"
import type { Scope } from "effect"
import { Deferred, Effect, Exit, FiberId, Option } from "effect"
import * as EffectScope from "effect/Scope"
import type { StorageError } from "../domain/errors.js"
import type { AuditDurability } from "../services/AuditLog.js"
import {
  ensureDirectory,
  FileMode,
  isNotFound,
  refuseSymlink,
  syncDirectory,
  toStorageError,
  utf8
} from "../platform/durable.js"

interface Pending {
  /** The day file's name, `YYYY-MM-DD.jsonl`. */
  readonly day: string
  readonly line: string
  readonly durability: AuditDurability
  readonly done: Deferred.Deferred<void, StorageError>
}

/** A day file kept open between batches. */
interface OpenDay {
  readonly file: FileSystem.File
  readonly scope: Scope.CloseableScope
  /** The inode it was opened as; None where the platform gives none (then it is opened each time). */
  readonly ino: Option.Option<number>
  /** Opened empty, so perhaps just created: the directory is fsynced with its first batch. */
  dirUnsynced: boolean
  /** Where this writer's last write ended (with a newline): a file still that size needs no look at its tail. */
  end: number
}

export interface AuditAppender {
  readonly append: (
    day: string,
    line: string,
    durability: AuditDurability
  ) => Effect.Effect<void, StorageError>
}

export const makeAuditAppender = (options: {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly dir: string
  /** Run `body` holding the cross-process `audit` lock (the one prunes hold). */
  readonly locked: <A>(body: Effect.Effect<A, StorageError>) => Effect.Effect<A, StorageError>
}): Effect.Effect<AuditAppender, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { fs, path, dir, locked } = options
    const days = new Map<string, OpenDay>()
    let pending: Array<Pending> = []
    /** Set while a writer runs; completed when it stops. */
    let running: Deferred.Deferred<void> | undefined

    const close = (day: string) =>
      Effect.suspend(() => {
        const open = days.get(day)
        days.delete(day)
        return open === undefined ? Effect.void : EffectScope.close(open.scope, Exit.void)
      })

    const openDay = (name: string, file: string) =>
      Effect.gen(function* () {
        // Appending in place would follow a link planted under the day's name.
        yield* refuseSymlink(fs, file)
        const scope = yield* EffectScope.make()
        const open = fs.open(file, { flag: "a+", mode: FileMode })
        const handle = yield* open.pipe(
          // The directory is made only when the first open finds it missing.
          Effect.catchIf(isNotFound, () => Effect.zipRight(ensureDirectory(fs, dir), open)),
          Effect.flatMap((handle) => Effect.map(handle.stat, (info) => ({ handle, info }))),
          EffectScope.extend(scope),
          Effect.tapError(() => EffectScope.close(scope, Exit.void))
        )
        const size = Number(handle.info.size)
        const day: OpenDay = {
          file: handle.handle,
          scope,
          ino: handle.info.ino,
          dirUnsynced: size === 0,
          end: -1
        }
        days.set(name, day)
        return { day, size }
      })

    /**
     * The open file for `name` and its size, if its name still leads to it (one stat of the name
     * tells both); opened (again) otherwise.
     */
    const dayFile = (name: string, file: string) =>
      Effect.gen(function* () {
        const open = days.get(name)
        if (open !== undefined) {
          const current = yield* Effect.option(fs.stat(file))
          if (
            Option.isSome(current) &&
            Option.isSome(open.ino) &&
            Option.getOrUndefined(current.value.ino) === open.ino.value
          )
            return { day: open, size: Number(current.value.size) }
          yield* close(name)
        }
        return yield* openDay(name, file)
      })

    /**
     * Write `lines` at the end of the day file `name`; under the lock, so no other writer or
     * prune moves the end between the stat and the write.
     */
    const writeLines = (name: string, lines: string) => {
      const file = path.join(dir, name)
      return Effect.gen(function* () {
        const { day, size } = yield* dayFile(name, file)
        let prefix = ""
        // A file that ends where this writer's last line did ends in that line's newline.
        if (size > 0 && size !== day.end) {
          yield* day.file.seek(size - 1, "start")
          const last = yield* day.file.readAlloc(1)
          if (Option.isSome(last) && last.value[0] !== 0x0a) prefix = "\n"
        }
        const bytes = utf8(prefix + lines)
        yield* day.file.writeAll(bytes)
        day.end = size + bytes.length
        return day
      }).pipe(
        Effect.mapError((error) =>
          error._tag === "StorageError" ? error : toStorageError("append", file)(error)
        ),
        // A file whose write failed may end in a part of it: open it afresh next time.
        Effect.tapError(() => close(name))
      )
    }

    const syncDay = (name: string, day: OpenDay) =>
      Effect.gen(function* () {
        yield* day.file.sync.pipe(Effect.mapError(toStorageError("fsync", path.join(dir, name))))
        if (day.dirUnsynced) {
          yield* syncDirectory(fs, dir)
          day.dirUnsynced = false
        }
      }).pipe(
        // After a failed fsync the kernel may have dropped the lines: never trust this handle again.
        Effect.tapError(() => close(name))
      )

    const runBatch = (batch: ReadonlyArray<Pending>) =>
      Effect.gen(function* () {
        const byDay = new Map<string, Array<Pending>>()
        for (const entry of batch) {
          const entries = byDay.get(entry.day)
          if (entries === undefined) byDay.set(entry.day, [entry])
          else entries.push(entry)
        }
        const written = yield* Effect.exit(
          locked(
            Effect.forEach(byDay, ([name, entries]) =>
              Effect.map(
                Effect.exit(writeLines(name, entries.map((entry) => entry.line).join(""))),
                (exit) => ({ name, entries, exit })
              )
            )
          )
        )
        if (Exit.isFailure(written)) {
          // The lock could not be taken: nothing was written.
          for (const entry of batch) yield* Deferred.failCause(entry.done, written.cause)
          return
        }
        for (const { entries, exit } of written.value) {
          if (Exit.isFailure(exit))
            for (const entry of entries) yield* Deferred.failCause(entry.done, exit.cause)
          else
            for (const entry of entries)
              if (entry.durability === "written") yield* Deferred.succeed(entry.done, undefined)
        }
        for (const { name, entries, exit } of written.value) {
          if (Exit.isFailure(exit)) continue
          const synced = yield* Effect.exit(syncDay(name, exit.value))
          for (const entry of entries)
            if (entry.durability === "synced") yield* Deferred.done(entry.done, synced)
          if (Exit.isFailure(synced) && entries.some((entry) => entry.durability === "written"))
            yield* Effect.logError(
              `audit: fsync of ${name} failed after read-only entries were answered; power loss may drop them`,
              synced.cause
            )
        }
        // Only today's file (the newest) stays open.
        const newest = [...days.keys()].sort().at(-1)
        for (const name of [...days.keys()]) if (name !== newest) yield* close(name)
      })

    /** Write batches until none waits, then say so on `stopped`. */
    const drain = (stopped: Deferred.Deferred<void>): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (pending.length === 0) {
          running = undefined
          return Deferred.succeed(stopped, undefined)
        }
        const batch = pending
        pending = []
        return runBatch(batch).pipe(
          // A defect must not leave its callers waiting (nor the writer marked as running).
          Effect.catchAllCause((cause) =>
            Effect.forEach(batch, (entry) => Deferred.failCause(entry.done, cause))
          ),
          Effect.zipRight(drain(stopped))
        )
      })

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        // Entries already handed to the writer are written and fsynced before the files close.
        while (running !== undefined) yield* Deferred.await(running)
        for (const name of [...days.keys()]) yield* close(name)
      })
    )

    return {
      append: (day, line, durability) =>
        Effect.suspend(() => {
          const done = Deferred.unsafeMake<void, StorageError>(FiberId.none)
          pending.push({ day, line, durability, done })
          if (running !== undefined) return Deferred.await(done)
          const stopped = Deferred.unsafeMake<void>(FiberId.none)
          running = stopped
          return Effect.zipRight(
            Effect.forkDaemon(Effect.uninterruptible(drain(stopped))),
            Deferred.await(done)
          )
        })
    }
  })
