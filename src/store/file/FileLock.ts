/**
 * Cross-process locks as files, and the protocol that keeps them exclusive.
 *
 * - Take: the lock `<dir>/<key>` is a symbolic link created with symlink(2), which fails if the
 *   name exists; its target is the holder `{owner, token, pid, host, boot_id, acquired_at,
 *   expires_at}` as JSON. The link and its content appear in one call, so no reader ever sees a
 *   partial lock and no crash leaves a lock without a holder; a reader takes it in one readlink.
 *   Nothing follows the link. (A regular file at the name, from an earlier version that wrote
 *   locks whole with temp file and `link`, is read as a lock too.)
 * - Stale: its boot id is not this boot's (same host), its pid is gone (same host), or it expired.
 * - Remove-if-held-by(T): every unlink of a lock file, by its owner or by a breaker, happens
 *   under a guard file `<file>.break-<T>` named after the token T it means to remove, and
 *   re-reads the file under that guard: it unlinks only if the file still carries T (it compares
 *   the whole content it judged, which holds T). (Only when the guard itself cannot be created,
 *   on a full disk, does an owner whose lock is well inside its lifetime remove it directly.)
 *   Two processes acting on the same judgement serialise on the same guard; a process acting on
 *   an old judgement finds a different token and does nothing. This closes the race where A
 *   and B both judge L1 stale, B replaces it with L2, and A removes L2.
 * - The lock is unlinked by renaming it onto its guard (one call rather than an unlink's three
 *   through the platform's FileSystem); the guard, released by plain unlink, takes it along.
 * - Guards are held for microseconds and released by plain unlink. A guard is broken (by the
 *   same remove-if-held-by, one level deeper) only when its holder is dead; a live local guard
 *   holder is never broken by time, so on one host no two processes can hold the same guard.
 * - Within one process, the fibers that want one key queue in memory, and only the first of
 *   them goes to the disk: the file lock is between processes, and no fiber polls a lock that
 *   a fiber of its own process holds.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Duration, Effect, Option, Random, Ref, Schema } from "effect"
import { sha256Hex } from "../../domain/canonical.js"
import { LockTimeout, StorageError } from "../../domain/errors.js"
import { isoTime, timeMillis, Timestamp } from "../../domain/Task.js"
import { Host } from "../../services/Host.js"
import {
  ensureDirectory,
  fromUtf8,
  isAlreadyExists,
  isNotFound,
  readIfExists,
  removeIfExists,
  toStorageError,
  utf8
} from "./durable.js"

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

/** What a lock or guard file holds: its token, and its whole content as written. */
interface Held {
  readonly token: string
  readonly text: string
}

export interface FileLockSettings {
  /** A lock older than this is stale even if its holder seems alive. */
  readonly ttlMillis?: number
  /** How long to wait for a live holder before failing with LockTimeout. */
  readonly waitMillis?: number
}

/** Generous: under heavy load many processes may queue for one task's lock. */
export const DefaultWaitMillis = 30_000
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

    /**
     * The holder a lock or guard names, as text: the target of its link, or the content of a
     * regular file (written by an earlier version, or by hand). None when it is gone.
     */
    const readHolder = (file: string): Effect.Effect<Option.Option<string>, StorageError> =>
      fs.readLink(file).pipe(
        Effect.map(Option.some),
        Effect.catchIf(isNotFound, () => Effect.succeedNone),
        Effect.catchAll(() => Effect.map(readIfExists(fs, file), Option.map(fromUtf8)))
      )

    /** The holder a file names, and whether it is stale; None when the file is gone. */
    const inspect = (file: string, isGuard: boolean) =>
      Effect.gen(function* () {
        const text = yield* readHolder(file)
        if (Option.isNone(text)) return Option.none<{ readonly held: Held; readonly stale: boolean }>()
        const holder = decodeLockFile(text.value)
        // A file we cannot read as a lock was not written by this protocol: break it by content.
        if (Option.isNone(holder)) {
          const token = `x${sha256Hex(utf8(text.value)).slice(0, 31)}`
          return Option.some({ held: { token, text: text.value }, stale: true })
        }
        const now = yield* Clock.currentTimeMillis
        return Option.some({
          held: { token: holder.value.token, text: text.value },
          stale: yield* isStale(holder.value, now, isGuard)
        })
      })

    const tryCreate = (file: string, ttl: number) =>
      Effect.gen(function* () {
        const token = yield* host.token
        const now = yield* Clock.currentTimeMillis
        const text = JSON.stringify({
          owner: `${host.pid}@${host.hostname}`,
          token,
          pid: host.pid,
          host: host.hostname,
          boot_id: host.bootId,
          acquired_at: isoTime(now),
          expires_at: isoTime(now + ttl)
        })
        const created = yield* fs.symlink(text, file).pipe(
          Effect.as(true),
          Effect.catchIf(isAlreadyExists, () => Effect.succeed(false)),
          Effect.mapError(toStorageError("symlink", file))
        )
        return created ? Option.some<Held>({ token, text }) : Option.none<Held>()
      })

    /**
     * Take `file`, breaking stale holders; returns what it now holds. While a live
     * holder has it, waiters only read the file (one readlink) and back off with jitter, so
     * many waiters cost little; they try to create it again once it is gone.
     */
    const take = (
      file: string,
      key: string,
      ttl: number,
      waitMillis: number,
      depth: number
    ): Effect.Effect<Held, LockTimeout | StorageError> =>
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
              yield* removeIfHeldBy(file, key, holder.value.held, waitMillis, depth)
              break
            }
            const now = yield* Clock.currentTimeMillis
            if (now - started >= waitMillis)
              return yield* new LockTimeout({ key, waitedMillis: now - started })
            const jitter = yield* Random.nextIntBetween(0, pause + 1)
            // Only the back-off is interruptible: no interruption can leave a created lock file behind.
            yield* Effect.interruptible(Effect.sleep(Duration.millis(pause + jitter)))
            pause = Math.min(pause * 2, MaxPauseMillis)
          }
        }
      })

    /**
     * Unlink `file` if, and only if, it still holds what `held` names (see the module comment).
     * The content is compared whole: the token in it is unique to one taking of the lock.
     */
    const removeIfHeldBy = (
      file: string,
      key: string,
      held: Held,
      waitMillis: number,
      depth: number
    ): Effect.Effect<void, LockTimeout | StorageError> => {
      const guard = `${file}.break-${held.token.slice(0, 32)}`
      return Effect.acquireUseRelease(
        take(guard, key, GuardTtlMillis, waitMillis, depth + 1),
        () =>
          Effect.flatMap(readHolder(file), (current) =>
            Option.isSome(current) && current.value === held.text
              ? // Moved onto the guard: one call frees the name, and removing the guard removes both.
                fs.rename(file, guard).pipe(Effect.mapError(toStorageError("rename", file)))
              : Effect.void
          ),
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
    const release = (file: string, key: string, held: Held, waitMillis: number) =>
      removeIfHeldBy(file, key, held, waitMillis, 0).pipe(
        Effect.catchTag("StorageError", (error) =>
          Effect.gen(function* () {
            const text = yield* readHolder(file)
            if (Option.isNone(text) || text.value !== held.text) return
            const holder = decodeLockFile(text.value)
            if (Option.isNone(holder)) return
            const now = yield* Clock.currentTimeMillis
            if (now >= timeMillis(holder.value.expires_at) - ttlMillis / 2) return yield* error
            yield* removeIfExists(fs, file)
          })
        )
      )

    /**
     * One gate per key for the fibers of this process, dropped when nobody uses it: a fiber
     * waits at the gate in memory, and only the one that passes it takes the file lock.
     */
    const gates = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
    const enterGate = (key: string) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const gate = gates.get(key) ?? { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
          gate.users += 1
          gates.set(key, gate)
          return gate
        }),
        (gate) =>
          Effect.sync(() => {
            gate.users -= 1
            if (gate.users === 0) gates.delete(key)
          })
      )

    const acquire = (key: string, options?: { readonly waitMillis?: number; readonly ttlMillis?: number }) =>
      Effect.gen(function* () {
        if (!ValidKey.test(key)) {
          return yield* new StorageError({ operation: "lock", path: key, reason: "not a valid lock key" })
        }
        yield* ensureReady
        const file = path.join(directory, key)
        const waitMillis = options?.waitMillis ?? defaultWait
        const started = yield* Clock.currentTimeMillis
        const gate = yield* enterGate(key)
        const passed = yield* Effect.acquireRelease(
          gate.users === 1
            ? // Nobody else in this process holds or awaits the key: the gate is open.
              Effect.asSome(gate.semaphore.take(1))
            : // The wait stays interruptible inside acquireRelease, so that a timeout or a shutdown ends it.
              Effect.interruptible(gate.semaphore.take(1)).pipe(
                Effect.timeoutOption(Duration.millis(waitMillis))
              ),
          (permit) => (Option.isSome(permit) ? gate.semaphore.release(1) : Effect.void)
        )
        const waited = (yield* Clock.currentTimeMillis) - started
        if (Option.isNone(passed)) return yield* new LockTimeout({ key, waitedMillis: waited })
        yield* Effect.acquireRelease(
          take(file, key, options?.ttlMillis ?? ttlMillis, Math.max(waitMillis - waited, 0), 0),
          (held) =>
            release(file, key, held, waitMillis).pipe(
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
