/** Building locks for tests, planting lock files by hand, and a counter that catches a broken lock. */
import { FileSystem } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import type { Context } from "effect"
import { Array as Arr, Effect, Layer, Option, Ref, Schema } from "effect"
import { isoTime } from "../../src/domain/Task.js"
import { Host } from "../../src/services/Host.js"
import { Lock } from "../../src/services/Lock.js"
import type { FileLockSettings } from "../../src/store/file/FileLock.js"
import { fileLockLayer } from "../../src/store/file/FileLock.js"
import { buildService } from "./stores.js"
import type { HostOptions } from "./stores.js"

export type LockShape = Context.Tag.Service<Lock>

export const memoryLock = buildService(Lock, Lock.layerMemory)

/** File locks in `directory`, as a process with the given identity would take them. */
export const fileLockAt = (directory: string, host: HostOptions = {}, settings: FileLockSettings = {}) =>
  buildService(
    Lock,
    fileLockLayer(directory, settings).pipe(
      Layer.provide(Host.layerTest(host)),
      Layer.provide(nodeContextLayer)
    )
  )

/** The fields of a lock file, as FileLock.ts writes them. */
export const LockFields = Schema.Struct({
  owner: Schema.String,
  token: Schema.String,
  pid: Schema.Int,
  host: Schema.String,
  boot_id: Schema.String,
  acquired_at: Schema.String,
  expires_at: Schema.String
})
export type LockFields = typeof LockFields.Type
const decodeLockFile = Schema.decodeUnknownOption(Schema.parseJson(LockFields))

/** A 32-hex-digit token, as Host makes them, recognisable in a failing test. */
export const token = (digit: string): string => digit.repeat(32)

/** The JSON of a lock held by `pid` on `host`, taken `ageMillis` ago, expiring `expiresInMillis` from now. */
export const lockJson = (options: {
  readonly token: string
  readonly pid: number
  readonly host: string
  readonly bootId: string
  readonly expiresInMillis: number
  readonly nowMillis: number
}): string => {
  const fields: LockFields = {
    owner: `${options.pid}@${options.host}`,
    token: options.token,
    pid: options.pid,
    host: options.host,
    boot_id: options.bootId,
    acquired_at: isoTime(options.nowMillis - 1_000),
    expires_at: isoTime(options.nowMillis + options.expiresInMillis)
  }
  return JSON.stringify(fields)
}

/** The lock file at `file`, decoded; None when it is missing or not a lock. */
export const readLock = (file: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    if (!(yield* fs.exists(file))) return Option.none<LockFields>()
    return decodeLockFile(yield* fs.readFileString(file))
  })

export const writeText = (file: string, text: string) =>
  Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(file, text))

export const listNames = (directory: string) =>
  Effect.map(
    Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readDirectory(directory)),
    (names) => [...names].sort()
  )

/**
 * `fibers` fibers each run `iterations` read-pause-write increments of one counter under the
 * lock for `key`. A lock that admits two holders loses increments, and `maxInside` shows it.
 */
export const hammerCounter = (
  lock: LockShape,
  options: { readonly key: string; readonly fibers: number; readonly iterations: number }
) =>
  Effect.gen(function* () {
    const counter = yield* Ref.make(0)
    const inside = yield* Ref.make(0)
    const maxInside = yield* Ref.make(0)
    const section = Effect.gen(function* () {
      const entered = yield* Ref.updateAndGet(inside, (n) => n + 1)
      yield* Ref.update(maxInside, (max) => Math.max(max, entered))
      const seen = yield* Ref.get(counter)
      // A real pause, long enough for other fibers' file IO to finish and let them in.
      yield* Effect.sleep("1 millis")
      yield* Ref.set(counter, seen + 1)
      yield* Ref.update(inside, (n) => n - 1)
    })
    yield* Effect.forEach(
      Arr.range(1, options.fibers),
      () =>
        Effect.forEach(
          Arr.range(1, options.iterations),
          () => lock.withLock(options.key, section, { waitMillis: 30_000 }),
          { discard: true }
        ),
      { concurrency: "unbounded", discard: true }
    )
    return { count: yield* Ref.get(counter), maxInside: yield* Ref.get(maxInside) }
  })
