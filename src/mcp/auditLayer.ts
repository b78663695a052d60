/**
 * The audit log's layers: fsynced JSONL files under a directory, or a `Ref` for tests and
 * library users. They live beside the MCP pipeline because they apply its redaction rules.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Effect, Layer, Ref } from "effect"
import type { AuditEntry, AuditFilter, PruneRule } from "../domain/audit.js"
import { keptByRule, selectEntries } from "../domain/audit.js"
import type { StorageError } from "../domain/errors.js"
import { tempName } from "../platform/durable.js"
import { checkRoot } from "../platform/trust.js"
import type { AppendOptions } from "../services/AuditLog.js"
import { AuditLog } from "../services/AuditLog.js"
import { Host } from "../services/Host.js"
import { Lock, lockTimeoutAsStorageError } from "../services/Lock.js"
import { fileLockLayer } from "../store/file/FileLock.js"
import { makeAuditAppender } from "./auditAppender.js"
import { dayFileOf, entryLine, readEntries, rewriteEntries } from "./auditFiles.js"
import { redact, redactMessage } from "../domain/redact.js"

/**
 * Every entry is redacted again as it is written, whoever built it: the pipeline already did,
 * but a library user appending by hand gets the same rules. Redacting twice changes nothing.
 */
const redactEntry = (entry: AuditEntry): AuditEntry => ({
  ...entry,
  arguments: redact(entry.arguments),
  error: entry.error === null ? null : { tag: entry.error.tag, message: redactMessage(entry.error.message) }
})

/**
 * The file layer: one JSON object per line in `<dir>/<YYYY-MM-DD>.jsonl`, written by one
 * appender per layer that shares a write and an fsync among concurrent appends (see
 * src/mcp/auditAppender.ts). Appends and prunes hold the `audit` lock under `<dir>/locks`.
 * Closing the layer waits for the appends in flight.
 */
export const auditLogLayer = (
  dir: string
): Layer.Layer<AuditLog, StorageError, FileSystem.FileSystem | Path.Path | Host> =>
  Layer.scoped(
    AuditLog,
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const lock = yield* Lock
      const host = yield* Host
      // Entries would be appended to (and read back from) files another user could forge.
      yield* checkRoot({ fs, path, uid: host.uid }, dir)
      const files = {
        fs,
        path,
        dir,
        tempName: Effect.map(host.token, (token) => tempName(host.pid, token))
      }
      const locked = <A>(body: Effect.Effect<A, StorageError>) =>
        lockTimeoutAsStorageError(lock.withLock("audit", body))
      const appender = yield* makeAuditAppender({ fs, path, dir, locked })
      return AuditLog.of({
        append: Effect.fn("AuditLog.append")(function* (entry: AuditEntry, options?: AppendOptions) {
          const redacted = redactEntry(entry)
          yield* appender.append(dayFileOf(redacted), entryLine(redacted), options?.durability ?? "synced")
        }),
        list: Effect.fn("AuditLog.list")(function* (filter: AuditFilter) {
          return selectEntries(yield* readEntries(files), filter)
        }),
        prune: Effect.fn("AuditLog.prune")(function* (rule: PruneRule) {
          return yield* locked(
            Effect.gen(function* () {
              const entries = yield* readEntries(files)
              const kept = keptByRule(entries, rule, yield* Clock.currentTimeMillis)
              yield* rewriteEntries(files, kept)
              return { removed: entries.length - kept.length, kept: kept.length }
            })
          )
        })
      })
    })
  ).pipe(Layer.provide(fileLockLayer(`${dir.replace(/\/+$/, "")}/locks`)))

/** Entries in one `Ref`, redacted and filtered by the same rules as the files. */
export const auditLogMemoryLayer: Layer.Layer<AuditLog> = Layer.effect(
  AuditLog,
  Effect.map(Ref.make<ReadonlyArray<AuditEntry>>([]), (entries) =>
    AuditLog.of({
      append: (entry) => Ref.update(entries, (all) => [...all, redactEntry(entry)]),
      list: (filter) => Effect.map(Ref.get(entries), (all) => selectEntries(all, filter)),
      prune: (rule) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Ref.modify(entries, (all) => {
            const kept = keptByRule(all, rule, now)
            return [{ removed: all.length - kept.length, kept: kept.length }, kept]
          })
        )
    })
  )
)
