/**
 * The memory store's layer: a JSONL file of records, locked through `<file>.lock` beside it,
 * indexed once per change of the file, searched in slices that let other calls run.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Effect, Layer, Option, Ref, Scheduler } from "effect"
import type { StorageError } from "../domain/errors.js"
import { InvalidInput, UnknownMemory } from "../domain/errors.js"
import { queryProblem } from "../domain/memory.js"
import type { MemoryIndex } from "../domain/memoryIndex.js"
import { indexMemory, scanIndexed } from "../domain/memoryIndex.js"
import type { MemoryScan } from "../domain/memoryScan.js"
import type { Host } from "../services/Host.js"
import { Lock, lockTimeoutAsStorageError } from "../services/Lock.js"
import { MemoryStore } from "../services/MemoryStore.js"
import { fileLockLayer } from "./file/FileLock.js"
import { appendMemories, loadMemoryFile, lockKeyFor, planImport } from "./memoryFile.js"

/** The store at `file`, locked through `<file>.lock`, reloaded whenever the file changes. */
export const memoryStoreLayer = (
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
        Effect.flatMap(cachedAt(stamp), (cached) => (cached === undefined ? reload : Effect.succeed(cached)))
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
