import { Schema } from "effect"
import { Timestamp } from "../domain/Task.js"

export const AuditStatus = Schema.Literal("ok", "error", "timeout", "denied", "invalid")
export type AuditStatus = typeof AuditStatus.Type

/** What the audit log cut from a call's arguments (see auditArguments.ts). */
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
  error: Schema.NullOr(Schema.Struct({ tag: Schema.String, message: Schema.String }))
})
export type AuditEntry = typeof AuditEntry.Type
