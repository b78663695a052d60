import type { Scope } from "effect"
import { Clock, Context, Duration, Effect, Fiber, Layer, Option, SynchronizedRef } from "effect"
import { LockTimeout, StorageError } from "../domain/errors.js"

/** How long a taker waits by default. Generous: under heavy load many processes may queue for one task's lock. */
export const DefaultWaitMillis = 30_000

export interface LockOptions {
  /** How long to wait for a lock held by a live holder before failing with LockTimeout. */
  readonly waitMillis?: number
  /** How long this hold may last before others may judge it stale (file locks). */
  readonly ttlMillis?: number
}

/**
 * An exclusive lock per key, across fibers and processes.
 *
 * Locks guard short read-modify-write sections (milliseconds). A holder that dies, or that
 * holds a lock past its time-to-live, loses it to the next taker; exclusion against a holder
 * that is merely paused for longer than that is the job of the fencing tokens in task leases.
 *
 * Live layer: `fileLockLayer(directory)` in src/store/file/FileLock.ts (lock files).
 */
export class Lock extends Context.Tag("relaykeep/Lock")<
  Lock,
  {
    /** Hold the lock for `key` while `scope` is open. */
    readonly acquire: (
      key: string,
      options?: LockOptions
    ) => Effect.Effect<void, LockTimeout | StorageError, Scope.Scope>
    /** Run `body` while holding the lock for `key`; released however `body` ends. */
    readonly withLock: <A, E, R>(
      key: string,
      body: Effect.Effect<A, E, R>,
      options?: LockOptions
    ) => Effect.Effect<A, E | LockTimeout | StorageError, R>
  }
>() {
  /** Locks within one process, for tests and in-memory stores. */
  static readonly layerMemory = Layer.effect(
    Lock,
    Effect.gen(function* () {
      const semaphores = yield* SynchronizedRef.make(new Map<string, Effect.Semaphore>())
      const semaphoreFor = (key: string) =>
        SynchronizedRef.modifyEffect(semaphores, (map) => {
          const existing = map.get(key)
          if (existing) return Effect.succeed([existing, map] as const)
          return Effect.map(
            Effect.makeSemaphore(1),
            (created) => [created, new Map(map).set(key, created)] as const
          )
        })
      const acquire = (key: string, options?: LockOptions) =>
        Effect.gen(function* () {
          const semaphore = yield* semaphoreFor(key)
          const waitMillis = options?.waitMillis ?? DefaultWaitMillis
          const started = yield* Clock.currentTimeMillis
          // The wait is interruptible inside acquireRelease, or its timeout could not end it; a
          // shutdown ends it too, unless the caller asked from an uninterruptible region (an
          // outcome write, a release), which waits its turn (in a fiber of its own, which the
          // caller's interruption does not reach) as the file lock does.
          const wait = Effect.interruptible(semaphore.take(1)).pipe(
            Effect.timeoutOption(Duration.millis(waitMillis))
          )
          const interruptible = yield* Effect.checkInterruptible((isInterruptible) =>
            Effect.succeed(isInterruptible)
          )
          const taken = yield* Effect.acquireRelease(
            interruptible ? wait : Effect.flatMap(Effect.forkDaemon(wait), Fiber.join),
            (permit) => (Option.isSome(permit) ? semaphore.release(1) : Effect.void)
          )
          if (Option.isNone(taken)) {
            const now = yield* Clock.currentTimeMillis
            return yield* new LockTimeout({ key, waitedMillis: now - started })
          }
        })
      return Lock.of({
        acquire,
        withLock: (key, body, options) => Effect.scoped(Effect.zipRight(acquire(key, options), body))
      })
    })
  )
}

/**
 * For stores and logs, a lock that could not be had is a storage failure: the operation did
 * not take effect. Maps LockTimeout into StorageError, leaving every other error as it is.
 */
export const lockTimeoutAsStorageError = <A, E, R>(
  effect: Effect.Effect<A, E | LockTimeout, R>
): Effect.Effect<A, Exclude<E, LockTimeout> | StorageError, R> =>
  Effect.catchIf(
    effect,
    (error): error is LockTimeout => error instanceof LockTimeout,
    (error) => Effect.fail(new StorageError({ operation: "lock", path: error.key, reason: error.message }))
  )
