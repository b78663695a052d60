/**
 * The few file-system moves every durable file of RelayKeep rests on, written once: the file
 * store's records and locks, the memory file, the audit log and the dashboard's token. None of
 * them reaches into another's folder for these. Every PlatformError is mapped to a StorageError
 * here, in one place.
 */
import type { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Deferred, Effect, FiberId, Option } from "effect"
import { StorageError } from "../domain/errors.js"

export const FileMode = 0o600
export const DirectoryMode = 0o700

export const toStorageError =
  (operation: string, path: string) =>
  (error: PlatformError): StorageError =>
    new StorageError({ operation, path, reason: error.message })

const isReason = (error: PlatformError, reason: string): boolean =>
  error._tag === "SystemError" && error.reason === reason

export const isNotFound = (error: PlatformError): boolean => isReason(error, "NotFound")
export const isAlreadyExists = (error: PlatformError): boolean => isReason(error, "AlreadyExists")

/**
 * The name of a temp file written beside its target (`writeDurable`, `createComplete`). Temp files
 * carry the writer's pid, so a sweep can tell a live writer's from a dead one's.
 */
export const tempName = (pid: number, token: string): string => `.tmp-${pid}-${token}`
export const pidOfTempName = (name: string): number | undefined => {
  const match = /^\.tmp-(\d+)-[0-9a-f]+$/.exec(name)
  return match?.[1] === undefined ? undefined : Number(match[1])
}

export type Files = FileSystem.FileSystem
export type Paths = Path.Path

/** fsync a directory, so that a rename or link inside it survives a machine crash. */
export const syncDirectory = (fs: Files, dir: string): Effect.Effect<void, StorageError> =>
  Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (handle) => handle.sync)).pipe(
    Effect.mapError(toStorageError("fsync", dir))
  )

/** Create `path` with O_EXCL and write all of `bytes`; optionally fsync before close. */
const writeNew = (
  fs: Files,
  path: string,
  bytes: Uint8Array,
  sync: boolean
): Effect.Effect<void, PlatformError> =>
  Effect.scoped(
    Effect.gen(function* () {
      const handle = yield* fs.open(path, { flag: "wx", mode: FileMode })
      // An empty file is complete once created (a write of nothing reports zero bytes written).
      if (bytes.length > 0) yield* handle.writeAll(bytes)
      if (sync) yield* handle.sync
    })
  )

/**
 * fsyncs of one directory shared by concurrent callers (group commit). A caller waits for an
 * fsync that began after it asked, so the renames and links it made before asking are covered;
 * every caller that asks while an fsync runs shares the next one. A failed fsync fails every
 * caller that shared it, and is never retried for them.
 *
 * A caller that finds no fsync running runs its own, in its own fiber (the common case of one
 * writer at a time costs no more than a plain fsync). The fsyncs that callers share run in a
 * fiber of their own, so that an interrupted caller never cuts one short for the others; a first
 * caller interrupted during its own fsync hands the callers that came meanwhile to such a fiber.
 */
export const makeSharedSync = (
  sync: Effect.Effect<void, StorageError>
): Effect.Effect<Effect.Effect<void, StorageError>> =>
  Effect.sync(() => {
    /** The callers waiting for the next fsync, which has not begun. */
    let next: Deferred.Deferred<void, StorageError> | undefined
    let running = false
    /** Run the fsyncs of the callers that wait, one batch at a time, until none waits. */
    const drain: Effect.Effect<void> = Effect.suspend(() => {
      const batch = next
      if (batch === undefined) {
        running = false
        return Effect.void
      }
      next = undefined
      return Effect.exit(sync).pipe(
        Effect.flatMap((exit) => Deferred.done(batch, exit)),
        Effect.zipRight(drain)
      )
    })
    const handOff = Effect.suspend(() => {
      if (next === undefined) {
        running = false
        return Effect.void
      }
      return Effect.asVoid(Effect.forkDaemon(drain))
    })
    // Masked, so that no interruption can land between taking the lead and installing its hand-off.
    return Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        if (running) {
          const batch = next ?? Deferred.unsafeMake<void, StorageError>(FiberId.none)
          next = batch
          return restore(Deferred.await(batch))
        }
        running = true
        return Effect.ensuring(restore(sync), handOff)
      })
    )
  })

/**
 * Replace `path` durably: write a temp file in the same directory (O_EXCL), fsync, close,
 * rename over `path`, fsync the directory (through `syncDir` when the caller shares its
 * directory fsyncs, see `makeSharedSync`). Only then may the caller acknowledge.
 * A failure leaves `path` as it was; the temp file is removed when possible.
 */
export const writeDurable = (
  fs: Files,
  paths: Paths,
  path: string,
  tempName: string,
  bytes: Uint8Array,
  syncDir: Effect.Effect<void, StorageError> = syncDirectory(fs, paths.dirname(path))
): Effect.Effect<void, StorageError> =>
  Effect.zipRight(replaceWhole(fs, paths, path, tempName, bytes, true), syncDir)

/**
 * Replace `path` atomically but not durably: readers see the old content or the new, never a
 * part, but a machine crash may lose the change (or leave the file empty). For hints only.
 */
export const writeHint = (
  fs: Files,
  paths: Paths,
  path: string,
  tempName: string,
  bytes: Uint8Array
): Effect.Effect<void, StorageError> => replaceWhole(fs, paths, path, tempName, bytes, false)

/** Write a temp file beside `path` (fsynced when `sync`) and rename it over `path`. */
const replaceWhole = (
  fs: Files,
  paths: Paths,
  path: string,
  tempName: string,
  bytes: Uint8Array,
  sync: boolean
): Effect.Effect<void, StorageError> => {
  const temp = paths.join(paths.dirname(path), tempName)
  return writeNew(fs, temp, bytes, sync).pipe(
    Effect.mapError(toStorageError("write", temp)),
    Effect.zipRight(fs.rename(temp, path).pipe(Effect.mapError(toStorageError("rename", path)))),
    Effect.tapError(() => fs.remove(temp).pipe(Effect.ignore))
  )
}

/**
 * Stage `bytes` durably in the new file `temp` (O_EXCL, write, fsync, close), to be linked into
 * place (`linkIfAbsent`). A failure removes the temp file when possible.
 */
export const stageDurable = (fs: Files, temp: string, bytes: Uint8Array): Effect.Effect<void, StorageError> =>
  writeNew(fs, temp, bytes, true).pipe(
    Effect.mapError(toStorageError("write", temp)),
    Effect.tapError(() => fs.remove(temp).pipe(Effect.ignore))
  )

/**
 * Link the complete file `temp` to `path` unless `path` exists: true once linked, false when
 * `path` was there (and is left unchanged). The temp name stays; the caller removes it.
 */
export const linkIfAbsent = (fs: Files, temp: string, path: string): Effect.Effect<boolean, StorageError> =>
  fs.link(temp, path).pipe(
    Effect.as(true),
    Effect.catchIf(isAlreadyExists, () => Effect.succeed(false)),
    Effect.mapError(toStorageError("link", path))
  )

/**
 * Create `path` atomically with its whole content, or report that it exists: the content is
 * written to a temp file first and hard-linked into place, so no reader ever sees it partial.
 * Returns false when `path` already exists.
 */
export const createComplete = (
  fs: Files,
  paths: Paths,
  path: string,
  tempName: string,
  bytes: Uint8Array,
  options: { readonly durable: boolean }
): Effect.Effect<boolean, StorageError> => {
  const dir = paths.dirname(path)
  const temp = paths.join(dir, tempName)
  return Effect.gen(function* () {
    yield* writeNew(fs, temp, bytes, options.durable).pipe(Effect.mapError(toStorageError("write", temp)))
    const created = yield* linkIfAbsent(fs, temp, path)
    // Once linked, the file exists whatever happens to the temp name: failing now would leave a
    // created file (a held lock) that nobody owns. A leftover temp file is swept at the next start.
    yield* fs.remove(temp).pipe(Effect.ignore)
    if (created && options.durable) yield* syncDirectory(fs, dir)
    return created
  }).pipe(Effect.tapError(() => fs.remove(temp).pipe(Effect.ignore)))
}

/**
 * Create a small file holding `bytes` (an index marker) unless it exists: true when this call
 * created it. Not fsynced: markers are hints. O_EXCL, so a symbolic link planted under the
 * marker's name is never followed.
 */
export const createIfAbsent = (
  fs: Files,
  path: string,
  bytes: Uint8Array
): Effect.Effect<boolean, StorageError> =>
  fs.writeFile(path, bytes, { flag: "wx", mode: FileMode }).pipe(
    Effect.as(true),
    Effect.catchIf(isAlreadyExists, () => Effect.succeed(false)),
    Effect.mapError(toStorageError("create", path))
  )

/** Create an empty file (an index marker); an existing one is fine. */
export const touch = (fs: Files, path: string): Effect.Effect<void, StorageError> =>
  Effect.asVoid(createIfAbsent(fs, path, new Uint8Array(0)))

/**
 * Refuse `path` when it is a symbolic link: for the files RelayKeep appends to in place (the
 * audit log), where a link would redirect its writes. Everything else inside a root is written
 * to an O_EXCL temp file and renamed, which never follows a link; and the root is private
 * (trust.ts), so only its own user could plant one.
 */
export const refuseSymlink = (fs: Files, path: string): Effect.Effect<void, StorageError> =>
  fs.readLink(path).pipe(
    Effect.matchEffect({
      onFailure: () => Effect.void,
      onSuccess: () =>
        Effect.fail(
          new StorageError({
            operation: "open",
            path,
            reason: "is a symbolic link; RelayKeep never follows one inside its data root (remove it)"
          })
        )
    })
  )

/** Remove a file; a missing one is fine. */
export const removeIfExists = (fs: Files, path: string): Effect.Effect<void, StorageError> =>
  fs.remove(path).pipe(
    Effect.catchIf(isNotFound, () => Effect.void),
    Effect.mapError(toStorageError("remove", path))
  )

export const readIfExists = (
  fs: Files,
  path: string
): Effect.Effect<Option.Option<Uint8Array>, StorageError> =>
  fs.readFile(path).pipe(
    Effect.map(Option.some),
    Effect.catchIf(isNotFound, () => Effect.succeedNone),
    Effect.mapError(toStorageError("read", path))
  )

export const listDirectory = (fs: Files, dir: string): Effect.Effect<ReadonlyArray<string>, StorageError> =>
  fs.readDirectory(dir).pipe(
    Effect.catchIf(isNotFound, () => Effect.succeed<Array<string>>([])),
    Effect.mapError(toStorageError("list", dir))
  )

export const ensureDirectory = (fs: Files, dir: string): Effect.Effect<void, StorageError> =>
  fs
    .makeDirectory(dir, { recursive: true, mode: DirectoryMode })
    .pipe(Effect.mapError(toStorageError("mkdir", dir)))

export const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)
export const fromUtf8 = (bytes: Uint8Array): string =>
  new TextDecoder("utf-8", { fatal: false }).decode(bytes)
