import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Context, Effect, Layer, Option, Ref, Scheduler } from "effect"
import type { InvalidRecord, StorageError } from "../domain/errors.js"
import { InvalidInput, UnknownMemory } from "../domain/errors.js"
import type { MemoryHit } from "../domain/memory.js"
import { queryProblem } from "../domain/memory.js"
import type { MemoryIndex } from "../domain/memoryIndex.js"
import { indexMemory, scanIndexed } from "../domain/memoryIndex.js"
import type { MemoryScan } from "../domain/memoryScan.js"
import { appendMemories, loadMemoryFile, lockKeyFor, planImport } from "../store/memoryFile.js"
import type { ImportReport } from "../store/memoryFile.js"
import type { Host } from "./Host.js"
import { Lock, lockTimeoutAsStorageError } from "./Lock.js"
import { fileLockLayer } from "../store/file/FileLock.js"

/**
 * A small knowledge file: one JSON record per line. Read-only to its MCP server; records are
 * added only by `import`, which validates every row before it changes anything.
 */
export class MemoryStore extends Context.Tag("relaykeep/MemoryStore")<
  MemoryStore,
  {
    /**
     * The best `limit` records holding every distinct term of `query` (memory.ts). A query over
     * the limits of `QueryLimits` is `InvalidInput`. A long search lets other fibers, and the
     * event loop, run between slices of its work, and stops at the next slice when interrupted.
     */
    readonly search: (
      query: string,
      limit: number
    ) => Effect.Effect<ReadonlyArray<MemoryHit>, InvalidInput | StorageError | InvalidRecord>
    /** The record exactly as imported. */
    readonly read: (id: string) => Effect.Effect<unknown, UnknownMemory | StorageError | InvalidRecord>
    /** Validate every row of `fixture`, then append the new ones durably, or change nothing. */
    readonly importFile: (
      fixture: string
    ) => Effect.Effect<ImportReport, InvalidInput | InvalidRecord | StorageError>
  }
>() {
  /** The store at `file`, locked through `<file>.lock`, reloaded whenever the file changes. */
  static readonly layer = (
    file: string
  ): Layer.Layer<MemoryStore, StorageError, FileSystem.FileSystem | Path.Path | Host> =>
    Layer.effect(
      MemoryStore,
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const lock = yield* Lock
        const store = path.resolve(file)
        const key = lockKeyFor(path.basename(store))
        const cache = yield* Ref.make(Option.none<{ readonly stamp: string; readonly index: MemoryIndex }>())
        const deps = { fs, path, store }

        const stampOf = fs.stat(store).pipe(
          Effect.map((info) => `${info.size}:${Option.getOrUndefined(info.mtime)?.getTime()}`),
          Effect.orElseSucceed(() => "missing")
        )
        const cachedAt = (stamp: string) =>
          Effect.map(Ref.get(cache), (cached) =>
            Option.isSome(cached) && cached.value.stamp === stamp ? cached.value.index : undefined
          )

        /**
         * The records (and their index), re-read under the lock when the file's size or mtime
         * changed. Once begun, a load is finished and cached even if the call that began it is
         * interrupted (a search over its time bound), so that the next call does not start over.
         */
        const reload = lockTimeoutAsStorageError(
          lock.withLock(
            key,
            Effect.gen(function* () {
              const stamp = yield* stampOf
              const cached = yield* cachedAt(stamp)
              if (cached !== undefined) return cached
              const index = indexMemory((yield* loadMemoryFile(deps)).records)
              yield* Ref.set(cache, Option.some({ stamp, index }))
              return index
            }).pipe(Effect.uninterruptible)
          )
        )
        /**
         * An unchanged file needs no lock: the cache was loaded whole under the lock, and an
         * import only ever appends, which changes the size. A changed stamp (or an import under
         * way that has written) goes through the lock and waits for the import to finish.
         */
        const records = Effect.flatMap(stampOf, (stamp) =>
          Effect.flatMap(cachedAt(stamp), (cached) =>
            cached === undefined ? reload : Effect.succeed(cached)
          )
        )
        return MemoryStore.of({
          search: Effect.fn("MemoryStore.search")(function* (query: string, limit: number) {
            const problem = queryProblem(query)
            if (problem !== undefined) return yield* new InvalidInput({ field: "query", reason: problem })
            return yield* runScan(scanIndexed(yield* records, query, limit))
          }),
          read: Effect.fn("MemoryStore.read")(function* (id: string) {
            const index = yield* records
            const found = index.records.find((stored) => stored.record.id === id)
            return found ? found.original : yield* new UnknownMemory({ id })
          }),
          importFile: Effect.fn("MemoryStore.importFile")((fixture: string) =>
            lockTimeoutAsStorageError(
              lock.withLock(
                key,
                Effect.gen(function* () {
                  const existing = yield* loadMemoryFile(deps)
                  const plan = yield* planImport(deps, existing, fixture)
                  yield* appendMemories(deps, plan.lines)
                  return plan.report
                })
              )
            )
          )
        })
      })
    ).pipe(Layer.provide(fileLockLayer(dirnameOf(file))))
}

/** Work per step of a scan, in characters' worth (memoryScan.ts): well under a millisecond. */
const StepBudget = 1 << 16
/** How long a scan runs at most before it lets the event loop run (a few steps more, at worst). */
const SliceMillis = 8

/**
 * Back to the event loop, not only to other fibers: Effect's default scheduler resumes a
 * yielded fiber in a microtask (up to 2,048 times in a row), before any I/O or timer. Through a
 * timer, the transport reads the next request, other calls answer, and a timeout can fire.
 */
const yieldToEventLoop = Effect.yieldNow().pipe(Effect.withScheduler(Scheduler.timer(0)))

/** Step `scan` to its end, yielding to the event loop whenever a slice of time has passed. */
const runScan = Effect.fn("MemoryStore.scan")(function* (scan: MemoryScan) {
  let since = yield* Clock.currentTimeMillis
  while (!scan.step(StepBudget)) {
    const now = yield* Clock.currentTimeMillis
    if (now - since < SliceMillis) continue
    yield* yieldToEventLoop
    since = yield* Clock.currentTimeMillis
  }
  return scan.hits()
})

const dirnameOf = (file: string): string => {
  const cut = file.lastIndexOf("/")
  return cut <= 0 ? (cut === 0 ? "/" : ".") : file.slice(0, cut)
}
