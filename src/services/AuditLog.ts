import type { Effect } from "effect"
import { Context } from "effect"
import type { AuditEntry, AuditFilter, PruneReport, PruneRule } from "../domain/audit.js"
import type { StorageError } from "../domain/errors.js"

export type { AuditFilter, PruneReport, PruneRule } from "../domain/audit.js"

/**
 * The append-only record of every MCP tool call. An entry is redacted again as it is appended,
 * whoever built it, and is durable once `append` succeeds: the pipeline answers a call only after.
 *
 * Layers: `auditLogLayer(dir)` (fsynced JSONL, one file per UTC day) and `auditLogMemoryLayer`,
 * both in src/mcp/auditLayer.ts, beside the redaction rules they apply.
 */
export class AuditLog extends Context.Tag("relaykeep/AuditLog")<
  AuditLog,
  {
    readonly append: (entry: AuditEntry) => Effect.Effect<void, StorageError>
    /** Matching entries, oldest first. */
    readonly list: (filter: AuditFilter) => Effect.Effect<ReadonlyArray<AuditEntry>, StorageError>
    /** Remove what `rule` does not keep; serialised with appends, so no entry is lost to a race. */
    readonly prune: (rule: PruneRule) => Effect.Effect<PruneReport, StorageError>
  }
>() {}
