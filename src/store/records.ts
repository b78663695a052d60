/** Stored records, in any store: one JSON document each, decoded with Schema and checked for self-consistency. */
import { Either, Schema } from "effect"
import { describeParseError } from "../domain/input.js"
import { describeJsonError, parseJson } from "../domain/json.js"
import { InvalidRecord } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import { RecordHead, TaskRecord } from "../domain/Task.js"
import { headDefect, recordDefect } from "../domain/transitions.js"

/**
 * Records are written by JSON.stringify, which cannot write more than a few thousand levels;
 * deeper is damage. Numbers and strings are read leniently: a provider's result may hold any
 * double or a lone surrogate, and the payload was checked strictly when it entered.
 */
export const MaxRecordDepth = 10_000
const decodeRecord = Schema.decodeUnknownEither(TaskRecord, { errors: "first" })
const decodeHead = Schema.decodeUnknownEither(RecordHead, { errors: "first" })

/** The parsed JSON of a stored record's text, or why it is damaged (`where` names the place). */
export const parseRecordText = (where: string, text: string): Either.Either<unknown, InvalidRecord> =>
  // Duplicate keys are damage too: which of the two would be the record?
  Either.mapLeft(
    parseJson(text, { strict: false, maxDepth: MaxRecordDepth }),
    (error) => new InvalidRecord({ file: where, reason: `not valid JSON: ${describeJsonError(error)}` })
  )

/**
 * Decode a stored record's parsed JSON, or say why it is damaged. `where` names the place in
 * the store (a file, a row) in the error; `secret` is the store's key, which the record's task
 * id must be made with.
 */
export const decodeRecordJson = (
  where: string,
  json: unknown,
  storedUnder: TaskId,
  secret: Uint8Array
): Either.Either<TaskRecord, InvalidRecord> => {
  const record = decodeRecord(json)
  // The field and what it should be, never the damaged value (it may be a secret).
  if (Either.isLeft(record))
    return Either.left(new InvalidRecord({ file: where, reason: describeParseError(record.left) }))
  const defect = recordDefect(record.right, storedUnder, secret)
  return defect === undefined
    ? Either.right(record.right)
    : Either.left(new InvalidRecord({ file: where, reason: defect }))
}

/**
 * Decode the JSON text of the record stored under `storedUnder`, or say why it is damaged: the
 * text parsed, then `decodeRecordJson`.
 */
export const decodeRecordText = (
  where: string,
  text: string,
  storedUnder: TaskId,
  secret: Uint8Array
): Either.Either<TaskRecord, InvalidRecord> =>
  Either.flatMap(parseRecordText(where, text), (json) => decodeRecordJson(where, json, storedUnder, secret))

/**
 * Decode a record read without its payload (a payload the JSON still holds is ignored, and its
 * hash is not checked: that is for the reads that return it), with every other check.
 */
export const decodeHeadJson = (
  where: string,
  json: unknown,
  storedUnder: TaskId,
  secret: Uint8Array
): Either.Either<RecordHead, InvalidRecord> => {
  const head = decodeHead(json)
  if (Either.isLeft(head))
    return Either.left(new InvalidRecord({ file: where, reason: describeParseError(head.left) }))
  const defect = headDefect(head.right, storedUnder, secret)
  return defect === undefined
    ? Either.right(head.right)
    : Either.left(new InvalidRecord({ file: where, reason: defect }))
}
