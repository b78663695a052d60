/**
 * The file store's worker registry: `<root>/workers/<instance>.json`, one file per running
 * watcher, replaced whole at each heartbeat. No lock is needed: each worker writes only its own
 * file, and a rename is atomic. No fsync either: after a machine crash no worker of the last
 * boot is alive, and a file the crash emptied or lost is what `prune` removes.
 */
import { Effect, Either, Option } from "effect"
import type { StorageError } from "../../domain/errors.js"
import { timeMillis } from "../../domain/time.js"
import type { WorkerPresence } from "../../domain/worker.js"
import { decodePresence, encodePresence, presenceOrder } from "../../domain/worker.js"
import type { Host } from "../../services/Host.js"
import type { WorkerRegistry } from "../../services/TaskStore.js"
import { onceSuccessful } from "../shared.js"
import type { Files, Paths } from "../../platform/durable.js"
import {
  ensureDirectory,
  fromUtf8,
  listDirectory,
  readIfExists,
  removeIfExists,
  tempName,
  utf8,
  writeHint
} from "../../platform/durable.js"
import type { Layout } from "./layout.js"
import { instanceOfWorkerFile } from "./layout.js"
import { sweepTempFilesIn } from "./recovery.js"

interface Deps {
  readonly fs: Files
  readonly path: Paths
  readonly host: Host["Type"]
  readonly layout: Layout
}

type Entry =
  | { readonly _tag: "ok"; readonly file: string; readonly presence: WorkerPresence }
  | { readonly _tag: "damaged"; readonly file: string }

export const fileWorkerRegistry = (
  { fs, path, host, layout }: Deps,
  openRoot: Effect.Effect<unknown, StorageError>
): Effect.Effect<WorkerRegistry> =>
  Effect.map(
    onceSuccessful(Effect.zipRight(openRoot, ensureDirectory(fs, layout.workers))),
    (ready): WorkerRegistry => {
      const fileOf = (instance: string) => path.join(layout.workers, `${instance}.json`)

      /** Every entry file; one removed between listing and reading is simply gone. */
      const entries = Effect.gen(function* () {
        const names = yield* listDirectory(fs, layout.workers)
        const found: Array<Entry> = []
        for (const name of names) {
          if (instanceOfWorkerFile(name) === undefined) continue
          const file = path.join(layout.workers, name)
          const bytes = yield* readIfExists(fs, file)
          if (Option.isNone(bytes)) continue
          const decoded = decodePresence(fromUtf8(bytes.value))
          // An entry must be stored under its own instance; anything else is not ours to trust.
          found.push(
            Either.isRight(decoded) && `${decoded.right.instance}.json` === name
              ? { _tag: "ok", file, presence: decoded.right }
              : { _tag: "damaged", file }
          )
        }
        return found
      })

      return {
        announce: Effect.fn("TaskStore.workers.announce")(function* (presence: WorkerPresence) {
          yield* ready
          const token = yield* host.token
          const bytes = utf8(`${encodePresence(presence)}\n`)
          yield* writeHint(fs, path, fileOf(presence.instance), tempName(host.pid, token), bytes)
        }),
        // An instance that is not a file name of ours names no entry: nothing to remove.
        retire: Effect.fn("TaskStore.workers.retire")((instance: string) =>
          instanceOfWorkerFile(`${instance}.json`) === instance
            ? Effect.zipRight(openRoot, removeIfExists(fs, fileOf(instance)))
            : Effect.void
        ),
        list: Effect.zipRight(
          openRoot,
          Effect.map(entries, (found) =>
            found.flatMap((entry) => (entry._tag === "ok" ? [entry.presence] : [])).sort(presenceOrder)
          )
        ).pipe(Effect.withSpan("TaskStore.workers.list")),
        // A worker frozen for over an hour that writes again just as its entry goes is listed
        // again at its next heartbeat.
        prune: Effect.fn("TaskStore.workers.prune")(function* (expiredBefore: number) {
          yield* ready
          // Temp files of heartbeats whose writer died mid-write.
          yield* sweepTempFilesIn({ fs, path, host }, [layout.workers])
          const stale = (yield* entries).filter(
            (entry) => entry._tag === "damaged" || timeMillis(entry.presence.expires_at) < expiredBefore
          )
          yield* Effect.forEach(stale, (entry) => removeIfExists(fs, entry.file), { discard: true })
          return stale.length
        })
      }
    }
  )
