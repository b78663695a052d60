/** Records on disk: one readable JSON document each, decoded with Schema and checked for self-consistency. */
import { Either, ParseResult, Schema } from "effect"
import { InvalidRecord } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { TaskRecord } from "../../domain/Task.js"
import { recordDefect } from "../../domain/transitions.js"
import { fromUtf8, utf8 } from "./durable.js"

const decodeJson = Schema.decodeUnknownEither(Schema.parseJson())
const decodeRecord = Schema.decodeUnknownEither(TaskRecord, { errors: "first" })

export const encodeRecord = (record: TaskRecord): Uint8Array => utf8(`${JSON.stringify(record, null, 2)}\n`)

/** Decode the bytes of `tasks/<storedUnder>.json`, or say why they are damaged. */
export const decodeRecordFile = (
  file: string,
  bytes: Uint8Array,
  storedUnder: TaskId
): Either.Either<TaskRecord, InvalidRecord> => {
  const damaged = (reason: string) => Either.left(new InvalidRecord({ file, reason }))
  const json = decodeJson(fromUtf8(bytes))
  if (Either.isLeft(json)) return damaged("not valid JSON")
  const record = decodeRecord(json.right)
  if (Either.isLeft(record)) {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(record.left)
    const where = issue && issue.path.length > 0 ? `${issue.path.join(".")}: ` : ""
    return damaged(`${where}${issue?.message ?? "does not decode"}`)
  }
  const defect = recordDefect(record.right, storedUnder)
  return defect === undefined ? Either.right(record.right) : damaged(defect)
}
