import type { Effect } from "effect"
import { Context } from "effect"
import type { InvalidInput, InvalidRecord, StorageError, UnknownMemory } from "../domain/errors.js"
import type { MemoryHit, MemoryImportReport } from "../domain/memory.js"

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
    ) => Effect.Effect<MemoryImportReport, InvalidInput | InvalidRecord | StorageError>
  }
>() {}
