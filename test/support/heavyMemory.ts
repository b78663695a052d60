/**
 * A memory store that is slow to search on purpose, within every limit: records of 1 MiB of
 * one letter, and a query of 32 distinct terms (`a`, `aa`, … 32 a's) that every record holds
 * hundreds of thousands of times. A search scans each record once per term, counting: about a
 * second in all on a 2-core machine, far longer than any cheap call, and it has no shortcut.
 */
import { MemoryLimits } from "../../src/domain/memory.js"

export const HeavyRecords = 16

/** The JSONL rows of the heavy store, ids `h0`, `h1`, …, and one small record `light`. */
export const heavyRows = (): ReadonlyArray<string> => [
  JSON.stringify({ id: "light", text: "a small note", source: "test" }),
  ...Array.from({ length: HeavyRecords }, (_, n) =>
    JSON.stringify({ id: `h${n}`, text: "a".repeat(MemoryLimits.textBytes - n), source: "test" })
  )
]

/** The query that makes every heavy record a hit, and costly to score. */
export const heavyQuery = Array.from({ length: 32 }, (_, n) => "a".repeat(n + 1)).join(" ")

/** The hits' ids the heavy query finds at limit 5: the longest texts score most. */
export const heavyTopIds = ["h0", "h1", "h2", "h3", "h4"]
