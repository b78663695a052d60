/** Records on disk: one readable JSON document each (see ../records.ts for decoding). */
import type { Either } from "effect"
import type { InvalidRecord } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import type { TaskRecord } from "../../domain/Task.js"
import { decodeRecordText } from "../records.js"
import { fromUtf8, utf8 } from "../../platform/durable.js"

export const encodeRecord = (record: TaskRecord): Uint8Array => utf8(`${JSON.stringify(record, null, 2)}\n`)

/** Decode the bytes of `tasks/<storedUnder>.json`, or say why they are damaged. */
export const decodeRecordFile = (
  file: string,
  bytes: Uint8Array,
  storedUnder: TaskId,
  secret: Uint8Array
): Either.Either<TaskRecord, InvalidRecord> => decodeRecordText(file, fromUtf8(bytes), storedUnder, secret)
