import { Schema } from "effect"
import { Timestamp } from "../domain/Task.js"

export const AuditStatus = Schema.Literal("ok", "error", "timeout", "denied", "invalid")
export type AuditStatus = typeof AuditStatus.Type

/** One call, as the audit log keeps it. `arguments` are redacted before they get here. */
export const AuditEntry = Schema.Struct({
  time: Timestamp,
  server: Schema.String,
  tool: Schema.String,
  status: AuditStatus,
  duration_ms: Schema.Number,
  arguments: Schema.Unknown,
  error: Schema.NullOr(Schema.Struct({ tag: Schema.String, message: Schema.String }))
})
export type AuditEntry = typeof AuditEntry.Type
