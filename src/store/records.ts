/** Stored records, in any store: one JSON document each, decoded with Schema and checked for self-consistency. */
import { Either, Schema } from "effect"
import { describeParseError } from "../domain/input.js"
import { describeJsonError, parseJson } from "../domain/json.js"
import { InvalidRecord } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import { TaskRecord } from "../domain/Task.js"
import { recordDefect } from "../domain/transitions.js"

/**
 * Records are written by JSON.stringify, which cannot write more than a few thousand levels;
 * deeper is damage. Numbers and strings are read leniently: a provider's result may hold any
 * double or a lone surrogate, and the payload was checked strictly when it entered.
 */
export const MaxRecordDepth = 10_000
const decodeRecord = Schema.decodeUnknownEither(TaskRecord, { errors: "first" })

/**
 * Decode the JSON text of the record stored under `storedUnder`, or say why it is damaged.
 * `where` names the place in the store (a file, a row) in the error; `secret` is the store's key,
 * which the record's task id must be made with.
 */
export const decodeRecordText = (
  where: string,
  text: string,
  storedUnder: TaskId,
  secret: Uint8Array
): Either.Either<TaskRecord, InvalidRecord> => {
  const damaged = (reason: string) => Either.left(new InvalidRecord({ file: where, reason }))
  // Duplicate keys are damage too: which of the two would be the record?
  const json = parseJson(text, { strict: false, maxDepth: MaxRecordDepth })
  if (Either.isLeft(json)) return damaged(`not valid JSON: ${describeJsonError(json.left)}`)
  const record = decodeRecord(json.right)
  if (Either.isLeft(record)) {
    // The field and what it should be, never the damaged value (it may be a secret).
    return damaged(describeParseError(record.left))
  }
  const defect = recordDefect(record.right, storedUnder, secret)
  return defect === undefined ? Either.right(record.right) : damaged(defect)
}
