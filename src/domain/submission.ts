import { Either, Schema } from "effect"
import { canonicalJson, sha256Hex } from "./canonical.js"
import { InvalidInput } from "./errors.js"
import { Text } from "./fields.js"
import { PayloadSha256 } from "./ids.js"
import type { JsonObject } from "./Task.js"

export const DefaultMaxPayloadBytes = 1024 * 1024

/**
 * Check a payload against what a store accepts and hash it: a JSON object whose canonical
 * serialization is at most `maxBytes` bytes. Names the field when it fails.
 */
export const preparePayload = (
  payload: JsonObject,
  maxBytes: number
): Either.Either<{ readonly sha: PayloadSha256; readonly bytes: number }, InvalidInput> => {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    return Either.left(new InvalidInput({ field: "payload", reason: "must be a JSON object" }))
  }
  let canonical: string
  try {
    canonical = canonicalJson(payload)
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error)
    return Either.left(new InvalidInput({ field: "payload", reason: `not JSON: ${reason}` }))
  }
  const bytes = Buffer.byteLength(canonical, "utf8")
  if (bytes > maxBytes) {
    return Either.left(
      new InvalidInput({ field: "payload", reason: `is ${bytes} bytes; the limit is ${maxBytes} bytes` })
    )
  }
  return Either.right({ sha: PayloadSha256.make(sha256Hex(canonical)), bytes })
}

/** A list cursor: the position after the last task of a page, opaque to callers. */
const CursorJson = Schema.parseJson(Schema.Tuple(Schema.String, Schema.String))

export const encodeCursor = (createdAt: string, taskId: string): string =>
  Buffer.from(JSON.stringify([createdAt, taskId]), "utf8").toString("base64url")

export const decodeCursor = (cursor: string): Either.Either<readonly [string, string], InvalidInput> =>
  Schema.decodeUnknownEither(CursorJson)(Buffer.from(cursor, "base64url").toString("utf8")).pipe(
    Either.mapLeft(() => new InvalidInput({ field: "cursor", reason: "is not a cursor returned by list" }))
  )

/** A cursor as an argument: refused when decoding the arguments, before any store is asked. */
export const ListCursor = Text.pipe(
  Schema.filter((cursor) => Either.isRight(decodeCursor(cursor)), {
    message: () => "must be a next_cursor returned by list",
    jsonSchema: {}
  })
)

/**
 * A ttl as a record keeps it: null (no limit) or a whole number of milliseconds from 0 to
 * Number.MAX_SAFE_INTEGER. Anything else is refused before the store is touched.
 */
export const checkTtl = (
  ttl: number | null | undefined
): Either.Either<number | null | undefined, InvalidInput> =>
  ttl === undefined || ttl === null || (Number.isSafeInteger(ttl) && ttl >= 0)
    ? Either.right(ttl)
    : Either.left(
        new InvalidInput({ field: "ttl", reason: "must be a whole number of milliseconds from 0, or null" })
      )
