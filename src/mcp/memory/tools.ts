/** The tools of `relaykeep-memory`: read-only search and read over one memory store. */
import { Duration, Effect, Schema } from "effect"
import { Integer, JsonValue, Text } from "../../domain/fields.js"
import {
  DefaultSearchTimeoutSeconds,
  MemoryHit,
  MemoryId,
  queryProblem,
  QueryLimits
} from "../../domain/memory.js"
import { MemoryStore } from "../../services/MemoryStore.js"
import { defineTool } from "../Tool.js"

export const MaxSearchLimit = 20
export const DefaultSearchLimit = 5
/** How long a search may run before it is stopped and answered with `ToolTimeout`. */
export const DefaultSearchTimeout = Duration.seconds(DefaultSearchTimeoutSeconds)

export const searchTool = defineTool({
  name: "search",
  description:
    "Find memory records whose text contains every whitespace-separated term of the query (case-insensitive substring match), most occurrences first, then file order. Returns id, a short snippet and the source of each hit.",
  input: Schema.Struct({
    query: Text.pipe(
      Schema.filter((text) => text.trim().length > 0, {
        message: () => "must contain at least one term",
        jsonSchema: { pattern: "\\S" }
      }),
      Schema.filter(queryProblem, { jsonSchema: { maxLength: QueryLimits.queryChars } })
    ).annotations({
      description: `Words to look for, separated by spaces; a record must contain every one of them (case-insensitive substrings). At most ${QueryLimits.queryChars} characters and ${QueryLimits.terms} distinct terms of at most ${QueryLimits.termChars} characters each; a term given twice counts once.`
    }),
    limit: Schema.optionalWith(
      Integer({ minimum: 1, maximum: MaxSearchLimit }).annotations({
        description: `How many hits to return at most: an integer from 1 to ${MaxSearchLimit}.`,
        default: DefaultSearchLimit
      }),
      { default: () => DefaultSearchLimit }
    )
  }),
  output: Schema.Struct({
    hits: Schema.Array(MemoryHit).annotations({ description: "The best hits, best first; empty when none" })
  }),
  tier: "read_only",
  timeout: DefaultSearchTimeout,
  handler: (input) =>
    Effect.flatMap(MemoryStore, (store) =>
      Effect.map(store.search(input.query, input.limit), (hits) => ({ hits }))
    )
})

export const readTool = defineTool({
  name: "read",
  description: "Return one memory record, by id, exactly as it was imported.",
  input: Schema.Struct({
    id: MemoryId.annotations({ description: "The id of a search hit: 1-200 printable characters." })
  }),
  output: Schema.Struct({
    record: JsonValue.annotations({ description: "The record, exactly as it was imported (a JSON object)" })
  }),
  tier: "read_only",
  handler: (input) =>
    Effect.flatMap(MemoryStore, (store) => Effect.map(store.read(input.id), (record) => ({ record })))
})

export const memoryTools = [searchTool, readTool]

/** The tools with another bound on how long a search may run (`memory serve --search-timeout`). */
export const memoryToolsWith = (options: { readonly searchTimeout: Duration.DurationInput }) => [
  { ...searchTool, timeout: options.searchTimeout },
  readTool
]
