/** What the audit log keeps of each MCP tool call, and the pure rules for reading and pruning it. */
import { Schema } from "effect"
import { Timestamp, timeMillis } from "./time.js"

export const AuditStatus = Schema.Literal("ok", "error", "timeout", "denied", "invalid")
export type AuditStatus = typeof AuditStatus.Type

/** What the audit log cut from a call's arguments (see src/mcp/auditArguments.ts). */
export const ArgumentsTruncated = Schema.Struct({
  /** The size of the redacted arguments as JSON; null when they were too deep to measure. */
  original_bytes: Schema.NullOr(Schema.Number),
  reason: Schema.String
})
export type ArgumentsTruncated = typeof ArgumentsTruncated.Type

/**
 * One call, as the audit log keeps it. `arguments` are redacted before they get here, and
 * bounded: `arguments_truncated` is there only when something was cut.
 */
export const AuditEntry = Schema.Struct({
  time: Timestamp,
  server: Schema.String,
  tool: Schema.String,
  status: AuditStatus,
  duration_ms: Schema.Number,
  arguments: Schema.Unknown,
  arguments_truncated: Schema.optional(ArgumentsTruncated),
  /** The task the call made or asked about, or whose run ended (MCP tasks). */
  task_id: Schema.optional(Schema.String),
  error: Schema.NullOr(Schema.Struct({ tag: Schema.String, message: Schema.String }))
})
export type AuditEntry = typeof AuditEntry.Type

export interface AuditFilter {
  readonly status?: AuditStatus | undefined
  readonly tool?: string | undefined
  /** Only entries at or after this time (epoch milliseconds). */
  readonly sinceMillis?: number | undefined
  /** At most this many, the newest. */
  readonly limit?: number | undefined
}

export type PruneRule = { readonly keepLast: number } | { readonly olderThanMillis: number }

export interface PruneReport {
  readonly removed: number
  readonly kept: number
}

/** The entries (oldest first) that `filter` selects, still oldest first: every log answers alike. */
export const selectEntries = (
  entries: ReadonlyArray<AuditEntry>,
  filter: AuditFilter
): ReadonlyArray<AuditEntry> => {
  const found = entries.filter(
    (entry) =>
      (filter.status === undefined || entry.status === filter.status) &&
      (filter.tool === undefined || entry.tool === filter.tool) &&
      (filter.sinceMillis === undefined || timeMillis(entry.time) >= filter.sinceMillis)
  )
  return filter.limit === undefined ? found : found.slice(Math.max(0, found.length - filter.limit))
}

/** The entries a prune keeps, at time `now`. */
export const keptByRule = (
  entries: ReadonlyArray<AuditEntry>,
  rule: PruneRule,
  now: number
): ReadonlyArray<AuditEntry> =>
  "keepLast" in rule
    ? entries.slice(Math.max(0, entries.length - rule.keepLast))
    : entries.filter((entry) => timeMillis(entry.time) >= now - rule.olderThanMillis)
