/**
 * What the file store does when it opens a root: create the layout, load or create the
 * secret, sweep temp files of dead writers, and after a reboot rebuild the index once.
 */
import { Effect, Either, Option } from "effect"
import { StorageError } from "../../domain/errors.js"
import type { Host } from "../../services/Host.js"
import type { Lock } from "../../services/Lock.js"
import type { Files, Paths } from "../../platform/durable.js"
import {
  createComplete,
  ensureDirectory,
  fromUtf8,
  listDirectory,
  pidOfTempName,
  readIfExists,
  removeIfExists,
  tempName,
  touch,
  utf8,
  writeDurable
} from "../../platform/durable.js"
import type { Layout } from "./layout.js"
import { bootTagOf, taskIdOfRecordFile, writerOfMarker } from "./layout.js"
import { decodeRecordFile } from "./records.js"

interface Deps {
  readonly fs: Files
  readonly path: Paths
  readonly host: Host["Type"]
  readonly lock: Lock["Type"]
  readonly layout: Layout
}

export const SecretBytes = 32

export const ensureLayout = ({ fs, layout }: Deps) =>
  Effect.forEach(
    [
      layout.root,
      layout.tasks,
      layout.queued,
      layout.running,
      layout.journal,
      layout.summary,
      layout.locks,
      layout.writers
    ],
    (dir) => ensureDirectory(fs, dir)
  )

/** The HMAC key for task ids, created once (whole and durable) by whichever process comes first. */
export const loadSecret = ({ fs, path, host, layout }: Deps): Effect.Effect<Uint8Array, StorageError> =>
  Effect.gen(function* () {
    if (Option.isNone(yield* readIfExists(fs, layout.secret))) {
      const fresh = yield* host.randomBytes(SecretBytes)
      const token = yield* host.token
      // Whoever links first wins; everyone then reads the winner's key.
      yield* createComplete(fs, path, layout.secret, tempName(host.pid, token), fresh, { durable: true })
    }
    const secret = yield* readIfExists(fs, layout.secret)
    if (Option.isNone(secret)) {
      return yield* new StorageError({ operation: "read", path: layout.secret, reason: "secret vanished" })
    }
    if (secret.value.length !== SecretBytes) {
      return yield* new StorageError({
        operation: "open",
        path: layout.secret,
        reason: `the secret must be ${SecretBytes} bytes; it is ${secret.value.length} (restore it from a backup: task ids depend on it)`
      })
    }
    return secret.value
  })

/** Remove temp files left by writers that are gone. A live writer's temp file is left alone. */
export const sweepTempFiles = (deps: Deps) =>
  sweepTempFilesIn(deps, [deps.layout.root, deps.layout.tasks, deps.layout.summary, deps.layout.locks])

/**
 * `sweepTempFiles` as an open does it: the small directories every time, and tasks/ (which holds
 * a file for every task) only when a store instance that is gone left its writer marker, which it
 * creates before its first temp file there and removes when it closes (`writerMarkerName`). Then
 * those markers go: their temp files have.
 */
export const sweepTempFilesAtOpen = (deps: Deps) =>
  Effect.gen(function* () {
    const { fs, path, host, layout } = deps
    yield* sweepTempFilesIn(deps, [layout.root, layout.summary, layout.locks])
    const boot = bootTagOf(host.bootId)
    const gone: Array<string> = []
    for (const name of yield* listDirectory(fs, layout.writers)) {
      const writer = writerOfMarker(name)
      if (writer === undefined) continue
      if (writer.boot !== boot || !(yield* host.isAlive(writer.pid))) gone.push(name)
    }
    if (gone.length === 0) return
    yield* sweepTempFilesIn(deps, [layout.tasks])
    yield* Effect.forEach(gone, (name) => removeIfExists(fs, path.join(layout.writers, name)), {
      discard: true
    })
  })

/** As `sweepTempFiles`, in the given directories. */
export const sweepTempFilesIn = (
  { fs, path, host }: Pick<Deps, "fs" | "path" | "host">,
  dirs: ReadonlyArray<string>
) =>
  Effect.forEach(
    dirs,
    (dir) =>
      Effect.flatMap(listDirectory(fs, dir), (names) =>
        Effect.forEach(
          names,
          (name) => {
            const pid = pidOfTempName(name)
            if (pid === undefined) return Effect.void
            return Effect.flatMap(host.isAlive(pid), (alive) =>
              alive ? Effect.void : removeIfExists(fs, path.join(dir, name))
            )
          },
          { discard: true }
        )
      ),
    { discard: true }
  )

/**
 * After a reboot, markers, lock files and the summary index, written without fsync, may be
 * missing or stale. The first process of the new boot rebuilds them from the records, under a root lock,
 * and then writes the new boot id; the others find the boot id current and do nothing.
 */
export const reconcileAfterBoot = (
  deps: Deps,
  secret: Uint8Array,
  /** What else to rebuild, once the markers are: the summary index. */
  alsoRebuild: Effect.Effect<unknown, StorageError> = Effect.void
) =>
  Effect.gen(function* () {
    const { fs, path, host, lock, layout } = deps
    const current = yield* readIfExists(fs, layout.boot)
    if (Option.isSome(current) && fromUtf8(current.value).trim() === host.bootId) return false
    return yield* lock.withLock(
      "reconcile",
      Effect.gen(function* () {
        const again = yield* readIfExists(fs, layout.boot)
        if (Option.isSome(again) && fromUtf8(again.value).trim() === host.bootId) return false
        // Only dead writers' temp files: a process of this boot may be writing one right now.
        yield* sweepTempFiles(deps)
        yield* rebuildIndex(deps, secret)
        yield* alsoRebuild
        const token = yield* host.token
        yield* writeDurable(fs, path, layout.boot, tempName(host.pid, token), utf8(`${host.bootId}\n`))
        return true
      }),
      // A rebuild of a large root can take a while: its lock must outlive every waiter's patience,
      // or a waiter would break it and rebuild at the same time.
      { waitMillis: 120_000, ttlMillis: 600_000 }
    )
  })

/** Make the index agree with the records: one marker per live record, none for anything else. */
const rebuildIndex = ({ fs, path, layout }: Deps, secret: Uint8Array) =>
  Effect.gen(function* () {
    const wanted = new Set<string>()
    for (const name of yield* listDirectory(fs, layout.tasks)) {
      const taskId = taskIdOfRecordFile(name)
      if (taskId === undefined) continue
      const file = path.join(layout.tasks, name)
      const bytes = yield* readIfExists(fs, file)
      if (Option.isNone(bytes)) continue
      const record = decodeRecordFile(file, bytes.value, taskId, secret)
      if (Either.isLeft(record)) continue
      if (record.right.state === "queued") wanted.add(layout.queuedMarker(record.right))
      if (record.right.state === "running") wanted.add(layout.runningMarker(taskId))
    }
    for (const dir of [layout.queued, layout.running]) {
      for (const name of yield* listDirectory(fs, dir)) {
        const marker = path.join(dir, name)
        if (!wanted.delete(marker)) yield* removeIfExists(fs, marker)
      }
    }
    yield* Effect.forEach(wanted, (marker) => touch(fs, marker), { discard: true })
  })
