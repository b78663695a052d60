/**
 * The FileSystem RelayKeep runs on: @effect/platform-node's, except that the short calls a
 * durable write makes on its way to an fsync are made synchronously, and every fsync is not.
 *
 * A durable submit is a dozen calls (create a marker, open, write and close a temp file, link,
 * unlink, fsync twice). Through libuv's thread pool each is a round trip of 50–200 µs on this
 * kind of machine, several times the call itself; measured on 2026-12-03, a submit took 3.4 ms
 * that way against 0.5 ms for the same calls made synchronously (`submit-vs-floor`). So here
 * `open`, `close`, writes to an open file, `writeFile`, `readFile` of a small regular file, `link`,
 * `rename`, `remove`, `stat`, `access`, `exists` and `readLink` run on the calling thread: each
 * takes microseconds on a local disk and does not wait for the disk (a write lands in the page
 * cache), except when the kernel makes it (a full journal, dirty-page throttling). So a data root
 * belongs on a local disk: on NFS or FUSE every call is a round trip, which would block the loop. `fsync` does wait for the
 * disk, for milliseconds on a busy one, so it stays on the thread pool, where it blocks nothing
 * and concurrent writers can share it (`makeSharedSync`). Listing a directory, which can hold
 * 100,000 names, stays there too, as does everything else.
 *
 * Errors are the platform's own `SystemError`s, with the same reasons (NotFound, AlreadyExists…),
 * the same path and syscall, so that code written against @effect/platform-node's FileSystem
 * behaves the same on this one (an argument Node refuses is a SystemError here, not BadArgument).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError, SystemErrorReason } from "@effect/platform/Error"
import { SystemError } from "@effect/platform/Error"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Effect, Layer, Option } from "effect"
import * as fs from "node:fs"

const reasonOf = (code: string | undefined): SystemErrorReason => {
  switch (code) {
    case "ENOENT":
      return "NotFound"
    case "EACCES":
      return "PermissionDenied"
    case "EEXIST":
      return "AlreadyExists"
    case "EISDIR":
    case "ENOTDIR":
    case "ELOOP":
      return "BadResource"
    case "EBUSY":
      return "Busy"
    default:
      return "Unknown"
  }
}

const systemError = (method: string, pathOrDescriptor: string | number, cause: unknown): PlatformError =>
  new SystemError({
    reason: reasonOf(cause instanceof Error && "code" in cause ? String(cause.code) : undefined),
    module: "FileSystem",
    method,
    pathOrDescriptor,
    ...(cause instanceof Error && "syscall" in cause && typeof cause.syscall === "string"
      ? { syscall: cause.syscall }
      : {}),
    description: cause instanceof Error ? cause.message : String(cause),
    cause
  })

/** A synchronous call as an Effect: its error as the platform reports it. */
const now = <A>(method: string, pathOrDescriptor: string | number, call: () => A) =>
  Effect.try({ try: call, catch: (cause) => systemError(method, pathOrDescriptor, cause) })

const infoOf = (stat: fs.Stats): FileSystem.File.Info => ({
  type: stat.isFile()
    ? "File"
    : stat.isDirectory()
      ? "Directory"
      : stat.isSymbolicLink()
        ? "SymbolicLink"
        : stat.isBlockDevice()
          ? "BlockDevice"
          : stat.isCharacterDevice()
            ? "CharacterDevice"
            : stat.isFIFO()
              ? "FIFO"
              : stat.isSocket()
                ? "Socket"
                : "Unknown",
  mtime: Option.some(stat.mtime),
  atime: Option.some(stat.atime),
  birthtime: Option.some(stat.birthtime),
  dev: stat.dev,
  rdev: Option.some(stat.rdev),
  ino: Option.some(stat.ino),
  mode: stat.mode,
  nlink: Option.some(stat.nlink),
  uid: Option.some(stat.uid),
  gid: Option.some(stat.gid),
  size: FileSystem.Size(stat.size),
  blksize: Option.some(FileSystem.Size(stat.blksize)),
  blocks: Option.some(stat.blocks)
})

/** fsync on the thread pool: the one call of an open file that waits for the disk. */
const fsyncLater = (fd: number): Effect.Effect<void, PlatformError> =>
  Effect.async<void, PlatformError>((resume) => {
    fs.fsync(fd, (error) => resume(error ? Effect.fail(systemError("sync", fd, error)) : Effect.void))
  })

/** An open file. Its position is its own (reads and writes move it), except in append mode. */
const makeFile = (fd: number, append: boolean): FileSystem.File => {
  let position = 0
  const advance = (by: number) => {
    if (!append) position += by
  }
  const writeFrom = (buffer: Uint8Array, method: string) =>
    now(method, fd, () => {
      const written = fs.writeSync(fd, buffer, 0, buffer.length, append ? null : position)
      advance(written)
      return written
    })
  const writeAll = (buffer: Uint8Array): Effect.Effect<void, PlatformError> =>
    Effect.flatMap(writeFrom(buffer, "writeAll"), (written) =>
      written === 0
        ? Effect.fail(
            new SystemError({
              module: "FileSystem",
              method: "writeAll",
              reason: "WriteZero",
              pathOrDescriptor: fd,
              description: "write returned 0 bytes written"
            })
          )
        : written < buffer.length
          ? writeAll(buffer.subarray(written))
          : Effect.void
    )
  const readInto = (buffer: Uint8Array, method: string) =>
    now(method, fd, () => {
      const read = fs.readSync(fd, buffer, 0, buffer.length, position)
      position += read
      return read
    })
  return {
    [FileSystem.FileTypeId]: FileSystem.FileTypeId,
    fd: FileSystem.FileDescriptor(fd),
    stat: now("stat", fd, () => infoOf(fs.fstatSync(fd))),
    seek: (offset, from) =>
      Effect.sync(() => {
        position = from === "start" ? Number(offset) : position + Number(offset)
      }),
    sync: fsyncLater(fd),
    read: (buffer) => Effect.map(readInto(buffer, "read"), FileSystem.Size),
    readAlloc: (size) =>
      Effect.suspend(() => {
        const buffer = new Uint8Array(Number(size))
        return Effect.map(readInto(buffer, "readAlloc"), (read) =>
          read === 0 ? Option.none() : Option.some(read === buffer.length ? buffer : buffer.slice(0, read))
        )
      }),
    truncate: (length) =>
      now("truncate", fd, () => {
        const size = length === undefined ? 0 : Number(length)
        fs.ftruncateSync(fd, size)
        if (!append && position > size) position = size
      }),
    write: (buffer) => Effect.map(writeFrom(buffer, "write"), FileSystem.Size),
    writeAll
  }
}

/**
 * Files read on the calling thread are at most this big: records, locks, markers, settings. A
 * larger file (a memory store of many megabytes, a day of audit entries) is read on the thread
 * pool, as is anything that is not a regular file (a FIFO given as `--payload-file` would block
 * the loop until its writer wrote).
 */
export const SmallFileBytes = 1 << 20

/** Everything left to read from `fd`, for a file whose size says nothing of its content. */
const readToEnd = (fd: number): Uint8Array | undefined => {
  const chunks: Array<Buffer> = []
  let total = 0
  for (;;) {
    const chunk = Buffer.allocUnsafe(4096)
    const got = fs.readSync(fd, chunk, 0, chunk.length, null)
    if (got === 0) return Buffer.concat(chunks, total)
    chunks.push(chunk.subarray(0, got))
    total += got
    // Past the small-file bound it is no small file: the thread pool reads it.
    if (total > SmallFileBytes) return undefined
  }
}

/** The whole of a small regular file; undefined for anything else (read it on the thread pool). */
const readSmallFile = (path: string): Uint8Array | undefined => {
  // Non-blocking, so that opening a FIFO does not wait for its writer.
  const fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
  try {
    const stat = fs.fstatSync(fd)
    if (!stat.isFile() || stat.size > SmallFileBytes) return undefined
    // A file of the kernel's (/proc, /sys) says it is empty and holds what it makes as it is read:
    // read it to its end, as Node's readFile does. (Reading it as empty once lost the boot id.)
    if (stat.size === 0) return readToEnd(fd)
    const bytes = Buffer.allocUnsafe(stat.size)
    let read = 0
    while (read < bytes.length) {
      const got = fs.readSync(fd, bytes, read, bytes.length - read, read)
      if (got === 0) break
      read += got
    }
    // As Node's own readFile: the size the file had when it was opened.
    return read === bytes.length ? bytes : bytes.subarray(0, read)
  } finally {
    fs.closeSync(fd)
  }
}

/** RelayKeep's FileSystem (see the module comment), over @effect/platform-node's. */
export const make = (node: FileSystem.FileSystem): FileSystem.FileSystem => ({
  ...makeBase(node),
  // Asked of a name that is usually absent (a record before its submit), so it must not build an
  // error to say so, as the derived `exists` (an `access` that fails) would.
  exists: (path) => now("exists", path, () => fs.statSync(path, { throwIfNoEntry: false }) !== undefined)
})

const makeBase = (node: FileSystem.FileSystem): FileSystem.FileSystem =>
  FileSystem.make({
    ...node,
    access: (path, options) =>
      now("access", path, () =>
        fs.accessSync(
          path,
          (options?.readable ? fs.constants.R_OK : 0) | (options?.writable ? fs.constants.W_OK : 0) ||
            fs.constants.F_OK
        )
      ),
    link: (from, to) => now("link", from, () => fs.linkSync(from, to)),
    open: (path, options) =>
      Effect.map(
        Effect.acquireRelease(
          now("open", path, () => fs.openSync(path, options?.flag ?? "r", options?.mode)),
          (fd) => Effect.sync(() => fs.closeSync(fd))
        ),
        (fd) => makeFile(fd, options?.flag?.startsWith("a") ?? false)
      ),
    readFile: (path) =>
      Effect.flatMap(
        now("readFile", path, () => readSmallFile(path)),
        (bytes) => (bytes === undefined ? node.readFile(path) : Effect.succeed(bytes))
      ),
    readLink: (path) => now("readLink", path, () => fs.readlinkSync(path)),
    // A file is unlinked (rm would stat it first); anything else goes through rm, as the
    // platform's does, so that a directory gets rm's answer.
    remove: (path, options) =>
      options?.recursive !== true && options?.force !== true
        ? Effect.catchIf(
            now("remove", path, () => fs.unlinkSync(path)),
            (error) => error._tag === "SystemError" && error.reason !== "NotFound",
            () => now("remove", path, () => fs.rmSync(path))
          )
        : now("remove", path, () =>
            fs.rmSync(path, { recursive: options?.recursive ?? false, force: options?.force ?? false })
          ),
    rename: (from, to) => now("rename", from, () => fs.renameSync(from, to)),
    stat: (path) => now("stat", path, () => infoOf(fs.statSync(path))),
    writeFile: (path, data, options) =>
      now("writeFile", path, () =>
        fs.writeFileSync(path, data, { flag: options?.flag ?? "w", mode: options?.mode })
      )
  })

/** The FileSystem every RelayKeep entrypoint provides; library users may provide it too. */
export const layer: Layer.Layer<FileSystem.FileSystem> = Layer.effect(
  FileSystem.FileSystem,
  Effect.map(FileSystem.FileSystem, make)
).pipe(Layer.provide(NodeFileSystem.layer))

/** @effect/platform-node's NodeContext with RelayKeep's FileSystem in place of its own. */
export const nodeContextLayer = Layer.merge(NodeContext.layer, layer)
