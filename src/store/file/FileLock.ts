/**
 * Cross-process locks as files, and the protocol that keeps them exclusive.
 *
 * - Take: the lock file `<dir>/<key>` is created whole (temp file, then `link`, which fails if
 *   the name exists), holding `{owner, token, pid, host, boot_id, acquired_at, expires_at}`.
 * - Stale: its boot id is not this boot's (same host), its pid is gone (same host), or it expired.
 * - Remove-if-held-by(T): every unlink of a lock file, by its owner or by a breaker, happens
 *   under a guard file `<file>.break-<T>` named after the token T it means to remove, and
 *   re-reads the file under that guard: it unlinks only if the file still carries T. (Only when
 *   the guard itself cannot be created, on a full disk, does an owner whose lock is well inside
 *   its lifetime remove it directly.)
 *   Two processes acting on the same judgement serialise on the same guard; a process acting on
 *   an old judgement finds a different token and does nothing. This closes the race where A
 *   and B both judge L1 stale, B replaces it with L2, and A removes L2.
 * - Guards are held for microseconds and released by plain unlink. A guard is broken (by the
 *   same remove-if-held-by, one level deeper) only when its holder is dead; a live local guard
 *   holder is never broken by time, so on one host no two processes can hold the same guard.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Duration, Effect, Layer, Option, Random, Ref, Schema } from "effect"
import { sha256Hex } from "../../domain/canonical.js"
import { LockTimeout, StorageError } from "../../domain/errors.js"
import { isoTime, timeMillis, Timestamp } from "../../domain/Task.js"
import { Host } from "../../services/Host.js"
import { DefaultWaitMillis, Lock } from "../../services/Lock.js"
import {
  createComplete,
  ensureDirectory,
  fromUtf8,
  readIfExists,
  removeIfExists,
  tempName,
  utf8
} from "../../platform/durable.js"

const LockFile = Schema.parseJson(
  Schema.Struct({
    owner: Schema.String,
    token: Schema.String,
    pid: Schema.Int,
    host: Schema.String,
    boot_id: Schema.String,
    acquired_at: Timestamp,
    expires_at: Timestamp
  })
)
const decodeLockFile = Schema.decodeUnknownOption(LockFile)

/** Who holds a lock, as its file says; None for a file this protocol did not write. */
export const holderOfLockFile = (
  bytes: Uint8Array
): Option.Option<{ readonly pid: number; readonly host: string; readonly boot_id: string }> =>
  decodeLockFile(fromUtf8(bytes))

export interface FileLockSettings {
  /** A lock older than this is stale even if its holder seems alive. */
  readonly ttlMillis?: number
  /** How long to wait for a live holder before failing with LockTimeout. */
  readonly waitMillis?: number
}

const MaxPauseMillis = 50
const DefaultTtlMillis = 30_000
const GuardTtlMillis = 10_000
/** Nested guards are only needed when breakers crash inside their microsecond window. */
const MaxGuardDepth = 3
const ValidKey = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,149}$/

export const makeFileLock = (directory: string, settings: FileLockSettings) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const host = yield* Host
    const ttlMillis = settings.ttlMillis ?? DefaultTtlMillis
    const defaultWait = settings.waitMillis ?? DefaultWaitMillis
    // Created on first use, not when the layer is built: building a layer writes nothing.
    const ready = yield* Ref.make(false)
    const ensureReady = Effect.flatMap(Ref.get(ready), (done) =>
      done ? Effect.void : Effect.zipRight(ensureDirectory(fs, directory), Ref.set(ready, true))
    )

    /** A local holder is judged by the process table; any holder, by its expiry. */
    const isStale = (holder: typeof LockFile.Type, now: number, isGuard: boolean) =>
      Effect.gen(function* () {
        if (holder.host === host.hostname) {
          if (holder.boot_id !== host.bootId) return true
          if (!(yield* host.isAlive(holder.pid))) return true
          if (isGuard) return false
        }
        return timeMillis(holder.expires_at) <= now
      })

    /** The token a file carries and whether it is stale; None when the file is gone. */
    const inspect = (file: string, isGuard: boolean) =>
      Effect.gen(function* () {
        const bytes = yield* readIfExists(fs, file)
        if (Option.isNone(bytes)) return Option.none<{ readonly token: string; readonly stale: boolean }>()
        const holder = decodeLockFile(fromUtf8(bytes.value))
        // A file we cannot read as a lock was not written by this protocol: break it by content.
        if (Option.isNone(holder))
          return Option.some({ token: `x${sha256Hex(bytes.value).slice(0, 31)}`, stale: true })
        const now = yield* Clock.currentTimeMillis
        return Option.some({ token: holder.value.token, stale: yield* isStale(holder.value, now, isGuard) })
      })

    const tryCreate = (file: string, ttl: number) =>
      Effect.gen(function* () {
        const token = yield* host.token
        const now = yield* Clock.currentTimeMillis
        const content = utf8(
          JSON.stringify({
            owner: `${host.pid}@${host.hostname}`,
            token,
            pid: host.pid,
            host: host.hostname,
            boot_id: host.bootId,
            acquired_at: isoTime(now),
            expires_at: isoTime(now + ttl)
          })
        )
        const created = yield* createComplete(fs, path, file, tempName(host.pid, token), content, {
          durable: false
        })
        return created ? Option.some(token) : Option.none<string>()
      })

    /**
     * Take `file`, breaking stale holders; returns the token that now holds it. While a live
     * holder has it, waiters only read the file (no temp file, no link) and back off with
     * jitter, so many waiters cost little; they try to create it again once it is gone.
     */
    const take = (
      file: string,
      key: string,
      ttl: number,
      waitMillis: number,
      depth: number,
      interruptible: boolean
    ): Effect.Effect<string, LockTimeout | StorageError> =>
      Effect.gen(function* () {
        const started = yield* Clock.currentTimeMillis
        let pause = 1
        for (;;) {
          const created = yield* tryCreate(file, ttl)
          if (Option.isSome(created)) return created.value
          for (;;) {
            const holder = yield* inspect(file, depth > 0)
            if (Option.isNone(holder)) break
            if (holder.value.stale && depth < MaxGuardDepth) {
              yield* removeIfHeldBy(file, key, holder.value.token, waitMillis, depth, interruptible)
              break
            }
            const now = yield* Clock.currentTimeMillis
            if (now - started >= waitMillis)
              return yield* new LockTimeout({ key, waitedMillis: now - started })
            const jitter = yield* Random.nextIntBetween(0, pause + 1)
            // Only the back-off can be interrupted, so no interruption leaves a created lock file
            // behind; and only when the caller could be: a taker in an uninterruptible region (an
            // attempt writing its outcome, a release at shutdown) waits its turn, bounded by its wait.
            const backOff = Effect.sleep(Duration.millis(pause + jitter))
            yield* interruptible ? Effect.interruptible(backOff) : backOff
            pause = Math.min(pause * 2, MaxPauseMillis)
          }
        }
      })

    /** Unlink `file` if, and only if, it still carries `token` (see the module comment). */
    const removeIfHeldBy = (
      file: string,
      key: string,
      token: string,
      waitMillis: number,
      depth: number,
      interruptible: boolean
    ): Effect.Effect<void, LockTimeout | StorageError> => {
      const guard = `${file}.break-${token.slice(0, 32)}`
      return Effect.acquireUseRelease(
        take(guard, key, GuardTtlMillis, waitMillis, depth + 1, interruptible),
        () =>
          Effect.gen(function* () {
            const current = yield* inspect(file, depth > 0)
            if (Option.isSome(current) && current.value.token === token) yield* removeIfExists(fs, file)
          }),
        () => removeIfExists(fs, guard).pipe(Effect.ignore)
      )
    }

    /**
     * Release our own lock, through the guard like any removal. If the guard cannot be created
     * (a full disk), and the lock is still ours and well inside its lifetime, it is removed
     * directly: then nobody can have judged it stale, and leaving it would block the task until
     * it expires. (A holder stalled past half its lifetime between that check and the removal
     * could still remove a successor's lock; the lease fence in the record stops such a holder.)
     */
    const release = (file: string, key: string, token: string, waitMillis: number) =>
      // A release runs as a finalizer, often of an interrupted fiber: its waits are never cut short.
      removeIfHeldBy(file, key, token, waitMillis, 0, false).pipe(
        Effect.catchTag("StorageError", (error) =>
          Effect.gen(function* () {
            const bytes = yield* readIfExists(fs, file)
            if (Option.isNone(bytes)) return
            const holder = decodeLockFile(fromUtf8(bytes.value))
            if (Option.isNone(holder) || holder.value.token !== token) return
            const now = yield* Clock.currentTimeMillis
            if (now >= timeMillis(holder.value.expires_at) - ttlMillis / 2) return yield* error
            yield* removeIfExists(fs, file)
          })
        )
      )

    const acquire = (key: string, options?: { readonly waitMillis?: number; readonly ttlMillis?: number }) =>
      Effect.gen(function* () {
        if (!ValidKey.test(key)) {
          return yield* new StorageError({ operation: "lock", path: key, reason: "not a valid lock key" })
        }
        yield* ensureReady
        const file = path.join(directory, key)
        const waitMillis = options?.waitMillis ?? defaultWait
        // Asked before acquireRelease, whose acquire is always uninterruptible.
        const interruptible = yield* Effect.checkInterruptible((isInterruptible) =>
          Effect.succeed(isInterruptible)
        )
        yield* Effect.acquireRelease(
          take(file, key, options?.ttlMillis ?? ttlMillis, waitMillis, 0, interruptible),
          (token) =>
            release(file, key, token, waitMillis).pipe(
              Effect.catchAll((error) => Effect.logWarning(`could not release lock ${key}: ${error.message}`))
            )
        )
      })

    return {
      acquire,
      withLock: <A, E, R>(
        key: string,
        body: Effect.Effect<A, E, R>,
        options?: { readonly waitMillis?: number }
      ) => Effect.scoped(Effect.zipRight(acquire(key, options), body))
    }
  })

/** The Lock port over lock files in `directory` (the protocol above; docs/file-store.md). */
export const fileLockLayer = (
  directory: string,
  settings?: FileLockSettings
): Layer.Layer<Lock, StorageError, FileSystem.FileSystem | Path.Path | Host> =>
  Layer.effect(Lock, makeFileLock(directory, settings ?? {}))
