import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Context, Effect, Layer, Option, Ref } from "effect"
import type { InvalidInput, InvalidRecord, StorageError } from "../domain/errors.js"
import { UnknownMemory } from "../domain/errors.js"
import type { MemoryHit } from "../domain/memory.js"
import type { MemoryIndex } from "../domain/memoryIndex.js"
import { indexMemory, searchIndexed } from "../domain/memoryIndex.js"
import { appendMemories, lockKeyFor, parseMemoryFile, planImport } from "../store/memoryFile.js"
import type { ImportReport } from "../store/memoryFile.js"
import type { Host } from "./Host.js"
import { Lock, lockTimeoutAsStorageError } from "./Lock.js"

/**
 * A small knowledge file: one JSON record per line. Read-only to its MCP server; records are
 * added only by `import`, which validates every row before it changes anything.
 */
export class MemoryStore extends Context.Tag("relaykeep/MemoryStore")<
  MemoryStore,
  {
    readonly search: (
      query: string,
      limit: number
    ) => Effect.Effect<ReadonlyArray<MemoryHit>, StorageError | InvalidRecord>
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

        /** The records (and their index), re-read under the lock when the file's size or mtime changed. */
        const reload = lockTimeoutAsStorageError(
          lock.withLock(
            key,
            Effect.gen(function* () {
              const stamp = yield* stampOf
              const cached = yield* cachedAt(stamp)
              if (cached !== undefined) return cached
              const index = indexMemory(yield* parseMemoryFile(deps))
              yield* Ref.set(cache, Option.some({ stamp, index }))
              return index
            })
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
          search: (query, limit) => Effect.map(records, (index) => searchIndexed(index, query, limit)),
          read: (id) =>
            Effect.flatMap(records, (index) => {
              const found = index.records.find((stored) => stored.record.id === id)
              return found ? Effect.succeed(found.original) : Effect.fail(new UnknownMemory({ id }))
            }),
          importFile: (fixture) =>
            lockTimeoutAsStorageError(
              lock.withLock(
                key,
                Effect.gen(function* () {
                  const existing = yield* parseMemoryFile(deps)
                  const plan = yield* planImport(deps, existing, fixture)
                  yield* appendMemories(deps, plan.lines)
                  return plan.report
                })
              )
            )
        })
      })
    ).pipe(Layer.provide(Lock.layer(dirnameOf(file))))
}

const dirnameOf = (file: string): string => {
  const cut = file.lastIndexOf("/")
  return cut <= 0 ? (cut === 0 ? "/" : ".") : file.slice(0, cut)
}
