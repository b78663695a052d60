/** The tools of `relaykeep-memory`: read-only search and read over one memory store. */
import { Effect, Schema } from "effect"
import { MemoryHit, MemoryId } from "../../domain/memory.js"
import { MemoryStore } from "../../services/MemoryStore.js"
import { defineTool } from "../Tool.js"

export const MaxSearchLimit = 20

export const searchTool = defineTool({
  name: "search",
  description:
    "Find memory records whose text contains every whitespace-separated term of the query (case-insensitive substring match), most occurrences first, then file order. Returns id, a short snippet and the source of each hit.",
  input: Schema.Struct({
    query: Schema.String.pipe(
      Schema.filter((text) => text.trim().length > 0, { message: () => "must contain at least one term" })
    ),
    limit: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, MaxSearchLimit)), { default: () => 5 })
  }),
  output: Schema.Struct({ hits: Schema.Array(MemoryHit) }),
  tier: "read_only",
  handler: (input) =>
    Effect.flatMap(MemoryStore, (store) =>
      Effect.map(store.search(input.query, input.limit), (hits) => ({ hits }))
    )
})

export const readTool = defineTool({
  name: "read",
  description: "Return one memory record, by id, exactly as it was imported.",
  input: Schema.Struct({ id: MemoryId }),
  output: Schema.Struct({ record: Schema.Unknown }),
  tier: "read_only",
  handler: (input) =>
    Effect.flatMap(MemoryStore, (store) => Effect.map(store.read(input.id), (record) => ({ record })))
})

export const memoryTools = [searchTool, readTool]
