import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Context, Effect, Layer, Ref } from "effect"
import type { StorageError } from "../domain/errors.js"
import { timeMillis } from "../domain/Task.js"
import type { AuditEntry, AuditStatus } from "./AuditEntry.js"
import { Host } from "../services/Host.js"
import { tempName } from "../store/file/layout.js"
import { checkRoot } from "../platform/trust.js"
import { Lock, lockTimeoutAsStorageError } from "../services/Lock.js"
import { fileLockLayer } from "../store/file/FileLock.js"
import { appendEntry, readEntries, rewriteEntries } from "./auditFiles.js"
import { redact, redactMessage } from "./redact.js"

export { AuditEntry, AuditStatus } from "./AuditEntry.js"

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

/**
 * Every entry is redacted again as it is written, whoever built it: the pipeline already did,
 * but a library user appending by hand gets the same rules. Redacting twice changes nothing.
 */
const redactEntry = (entry: AuditEntry): AuditEntry => ({
  ...entry,
  arguments: redact(entry.arguments),
  error: entry.error === null ? null : { tag: entry.error.tag, message: redactMessage(entry.error.message) }
})

const matches = (filter: AuditFilter) => (entry: AuditEntry) =>
  (filter.status === undefined || entry.status === filter.status) &&
  (filter.tool === undefined || entry.tool === filter.tool) &&
  (filter.sinceMillis === undefined || timeMillis(entry.time) >= filter.sinceMillis)

const selectKept = (entries: ReadonlyArray<AuditEntry>, rule: PruneRule, now: number) =>
  "keepLast" in rule
    ? entries.slice(Math.max(0, entries.length - rule.keepLast))
    : entries.filter((entry) => timeMillis(entry.time) >= now - rule.olderThanMillis)

/**
 * The append-only record of every tool call. The file layer writes one JSON object per line
 * to `<dir>/<YYYY-MM-DD>.jsonl`, fsynced before the call's answer goes back.
 */
export class AuditLog extends Context.Tag("relaykeep/AuditLog")<
  AuditLog,
  {
    readonly append: (entry: AuditEntry) => Effect.Effect<void, StorageError>
    /** Matching entries, oldest first. */
    readonly list: (filter: AuditFilter) => Effect.Effect<ReadonlyArray<AuditEntry>, StorageError>
    readonly prune: (rule: PruneRule) => Effect.Effect<PruneReport, StorageError>
  }
>() {
  static readonly layer = (
    dir: string
  ): Layer.Layer<AuditLog, StorageError, FileSystem.FileSystem | Path.Path | Host> =>
    Layer.effect(
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
        return AuditLog.of({
          append: (entry) => locked(appendEntry(files, redactEntry(entry))),
          list: (filter) =>
            Effect.map(readEntries(files), (entries) => {
              const found = entries.filter(matches(filter))
              return filter.limit === undefined
                ? found
                : found.slice(Math.max(0, found.length - filter.limit))
            }),
          prune: (rule) =>
            locked(
              Effect.gen(function* () {
                const entries = yield* readEntries(files)
                const kept = selectKept(entries, rule, yield* Clock.currentTimeMillis)
                yield* rewriteEntries(files, kept)
                return { removed: entries.length - kept.length, kept: kept.length }
              })
            )
        })
      })
    ).pipe(Layer.provide(fileLockLayer(`${dir.replace(/\/+$/, "")}/locks`)))

  static readonly layerMemory = Layer.effect(
    AuditLog,
    Effect.map(Ref.make<ReadonlyArray<AuditEntry>>([]), (entries) =>
      AuditLog.of({
        append: (entry) => Ref.update(entries, (all) => [...all, redactEntry(entry)]),
        list: (filter) =>
          Effect.map(Ref.get(entries), (all) => {
            const found = all.filter(matches(filter))
            return filter.limit === undefined ? found : found.slice(Math.max(0, found.length - filter.limit))
          }),
        prune: (rule) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) =>
            Ref.modify(entries, (all) => {
              const kept = selectKept(all, rule, now)
              return [{ removed: all.length - kept.length, kept: kept.length }, kept]
            })
          )
      })
    )
  )
}
