import type { Effect } from "effect"
import { Context } from "effect"
import type { AuditEntry, AuditFilter, PruneReport, PruneRule } from "../domain/audit.js"
import type { StorageError } from "../domain/errors.js"

export type { AuditFilter, PruneReport, PruneRule } from "../domain/audit.js"

/**
 * How durable an entry is once `append` returns. `synced` (the default): fsynced, so neither a
 * crash nor power loss drops it. `written`: in the file, so a crash of the process does not drop
 * it; the fsync follows at once, and power loss before it ends may drop the entry.
 */
export type AuditDurability = "synced" | "written"

export interface AppendOptions {
  readonly durability?: AuditDurability
}

/**
 * The append-only record of every MCP tool call. An entry is redacted again as it is appended,
 * whoever built it, and is in the log once `append` succeeds (fsynced, unless the caller asked
 * only for `written`): the pipeline answers a call only after. Concurrent appends may share one
 * write and one fsync.
 *
 * Layers: `auditLogLayer(dir)` (fsynced JSONL, one file per UTC day) and `auditLogMemoryLayer`,
 * both in src/mcp/auditLayer.ts, beside the redaction rules they apply.
 */
export class AuditLog extends Context.Tag("relaykeep/AuditLog")<
  AuditLog,
  {
    readonly append: (entry: AuditEntry, options?: AppendOptions) => Effect.Effect<void, StorageError>
    /** Matching entries, oldest first. */
    readonly list: (filter: AuditFilter) => Effect.Effect<ReadonlyArray<AuditEntry>, StorageError>
    /** Remove what `rule` does not keep; serialised with appends, so no entry is lost to a race. */
    readonly prune: (rule: PruneRule) => Effect.Effect<PruneReport, StorageError>
  }
>() {}
