/** Reading a whole file store: every record, decoded or reported damaged. O(all tasks). */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Either, Option } from "effect"
import type { StorageError } from "../../domain/errors.js"
import { InvalidInput } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import type { InvalidRecordReport, TaskRecord } from "../../domain/Task.js"
import type { Files, Paths } from "../../platform/durable.js"
import { listDirectory, readIfExists } from "../../platform/durable.js"
import type { Layout } from "./layout.js"
import { layoutOf, taskIdOfRecordFile } from "./layout.js"
import { SecretBytes } from "./recovery.js"
import { decodeStoredRecord } from "./records.js"

export interface Scan {
  readonly records: ReadonlyArray<TaskRecord>
  readonly invalid: ReadonlyArray<InvalidRecordReport>
  /** The revision of each record (records.ts). */
  readonly revisions: ReadonlyMap<TaskId, number>
}

export const scanRecords = (
  fs: Files,
  path: Paths,
  layout: Layout,
  secret: Uint8Array
): Effect.Effect<Scan, StorageError> =>
  Effect.gen(function* () {
    const records: Array<TaskRecord> = []
    const invalid: Array<InvalidRecordReport> = []
    const revisions = new Map<TaskId, number>()
    for (const name of yield* listDirectory(fs, layout.tasks)) {
      if (!name.endsWith(".json")) continue
      const file = path.join(layout.tasks, name)
      const taskId = taskIdOfRecordFile(name)
      if (taskId === undefined) {
        invalid.push({ file, reason: "file name is not a task id" })
        continue
      }
      const bytes = yield* readIfExists(fs, file)
      if (Option.isNone(bytes)) continue
      Either.match(decodeStoredRecord(file, bytes.value, taskId, secret), {
        onLeft: (error) => invalid.push({ file: error.file, reason: error.reason }),
        onRight: (stored) => {
          records.push(stored.record)
          revisions.set(taskId, stored.revision)
        }
      })
    }
    return { records, invalid, revisions }
  })

export interface FileStoreContents extends Scan {
  /** The key its task ids are made with. */
  readonly secret: Uint8Array
}

/**
 * Everything a file store holds, read without changing anything (`relaykeep migrate`): its
 * key and every record. A directory without a key is not a data root.
 */
export const readFileStore = (
  root: string
): Effect.Effect<FileStoreContents, InvalidInput | StorageError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const layout = layoutOf(path, path.resolve(root))
    const secret = yield* readIfExists(fs, layout.secret)
    if (Option.isNone(secret) || secret.value.length !== SecretBytes)
      return yield* new InvalidInput({
        field: "--from",
        reason: `${layout.root} is not a RelayKeep data root (it has no ${SecretBytes}-byte secret)`
      })
    return { secret: secret.value, ...(yield* scanRecords(fs, path, layout, secret.value)) }
  })
