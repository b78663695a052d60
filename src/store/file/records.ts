/**
 * Records on disk: one readable JSON document each (see ../records.ts for decoding), with the
 * file store's own `revision` beside the record's fields: how many times the record has been
 * written after its submit (0 for a record as submitted). The summary index orders the entries
 * of one task by it (summaryIndex.ts). A record written before revisions were kept has none,
 * and counts as 0 until its next write.
 */
import { Either } from "effect"
import type { InvalidRecord } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import type { TaskRecord } from "../../domain/Task.js"
import { decodeRecordJson, parseRecordText } from "../records.js"
import { fromUtf8, utf8 } from "../../platform/durable.js"

export const encodeRecord = (record: TaskRecord, revision: number): Uint8Array =>
  utf8(`${JSON.stringify({ ...record, revision }, null, 2)}\n`)

/** A record as the file store keeps it: the record, and its revision. */
export interface StoredRecord {
  readonly record: TaskRecord
  readonly revision: number
}

const revisionOf = (json: unknown): number =>
  typeof json === "object" &&
  json !== null &&
  "revision" in json &&
  typeof json.revision === "number" &&
  Number.isSafeInteger(json.revision) &&
  json.revision >= 0
    ? json.revision
    : 0

/** Decode the bytes of `tasks/<storedUnder>.json` with its revision, or say why they are damaged. */
export const decodeStoredRecord = (
  file: string,
  bytes: Uint8Array,
  storedUnder: TaskId,
  secret: Uint8Array
): Either.Either<StoredRecord, InvalidRecord> =>
  Either.flatMap(parseRecordText(file, fromUtf8(bytes)), (json) =>
    Either.map(decodeRecordJson(file, json, storedUnder, secret), (record) => ({
      record,
      revision: revisionOf(json)
    }))
  )

/** Decode the bytes of `tasks/<storedUnder>.json`, or say why they are damaged. */
export const decodeRecordFile = (
  file: string,
  bytes: Uint8Array,
  storedUnder: TaskId,
  secret: Uint8Array
): Either.Either<TaskRecord, InvalidRecord> =>
  Either.map(decodeStoredRecord(file, bytes, storedUnder, secret), (stored) => stored.record)
