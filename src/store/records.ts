/** Stored records, in any store: one JSON document each, decoded with Schema and checked for self-consistency. */
import type { ParseResult } from "effect"
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
 * A decoder of stored JSON: `decode` checks its shape, then `defect` says whether what it
 * decoded agrees with itself (named by `where`; `secret` is the store's key, which the record's
 * task id must be made with). The error names the field and what it should be, never the
 * damaged value (it may be a secret).
 */
const checkedDecoder =
  <A>(
    decode: (json: unknown) => Either.Either<A, ParseResult.ParseError>,
    defect: (decoded: A, storedUnder: TaskId, secret: Uint8Array) => string | undefined
  ) =>
  (where: string, json: unknown, storedUnder: TaskId, secret: Uint8Array): Either.Either<A, InvalidRecord> =>
    Either.flatMap(
      Either.mapLeft(
        decode(json),
        (error) => new InvalidRecord({ file: where, reason: describeParseError(error) })
      ),
      (decoded) => {
        const reason = defect(decoded, storedUnder, secret)
        return reason === undefined
          ? Either.right(decoded)
          : Either.left(new InvalidRecord({ file: where, reason }))
      }
    )

/** Decode a stored record's parsed JSON, or say why it is damaged. */
export const decodeRecordJson = checkedDecoder(decodeRecord, recordDefect)

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
export const decodeHeadJson = checkedDecoder(decodeHead, headDefect)
