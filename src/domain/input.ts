/** Decoding outside input with Schema, so every rejection names the field that is wrong. */
import { Effect, Either, ParseResult, Schema } from "effect"
import { InvalidInput } from "./errors.js"
import { describeJsonError, parseJson } from "./json.js"

/**
 * The first problem Schema found, as `path: message`. Schema's messages end with
 * `, actual <value>`: that is cut, because the value is the caller's input (it may be a
 * secret, or megabytes) and error messages travel to logs and audit files.
 */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const { path, message } = parseIssue(error)
  return path === undefined ? message : `${path}: ${message}`
}

/** Schema's default messages quote the value: `Expected string, actual "hunter2"`. */
const ActualValue = /,? actual [\s\S]*$/
/** Transformation messages may hold the value another way (a JSON error's slice): never shown. */
const Expected = /^(Expected [\s\S]*?)(?:,? actual [\s\S]*)?$/

/**
 * The first issue Schema found: its path (field names) and what was expected, never the value.
 * Our own messages (`must be …`) are kept; Schema's `Expected X, actual Y` keeps `Expected X`;
 * anything else becomes `is invalid`, since only ours and Schema's are known to be value-free.
 */
export const parseIssue = (
  error: ParseResult.ParseError
): { readonly path: string | undefined; readonly message: string } => {
  const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
  if (!issue) return { path: undefined, message: "is invalid" }
  const path = issue.path.length > 0 ? issue.path.join(".") : undefined
  const own = /^(must|is) /.test(issue.message)
  const expected = Expected.exec(issue.message)?.[1]
  const message = own
    ? issue.message.replace(ActualValue, "")
    : expected !== undefined && expected.length <= 200
      ? expected
      : "is invalid"
  return { path, message }
}

export const decodeField =
  <A, I>(field: string, schema: Schema.Schema<A, I>) =>
  (value: unknown): Effect.Effect<A, InvalidInput> =>
    Schema.decodeUnknown(schema, { errors: "first", onExcessProperty: "error" })(value).pipe(
      Effect.mapError((error) => new InvalidInput({ field, reason: describeParseError(error) }))
    )

/**
 * Bytes as strict UTF-8, naming the field when they are not: invalid bytes are refused, never
 * replaced, since a replaced byte would make two different inputs one.
 */
export const decodeUtf8Field = (field: string, bytes: Uint8Array): Either.Either<string, InvalidInput> =>
  Either.try({
    try: () => new TextDecoder("utf-8", { fatal: true }).decode(bytes),
    catch: () => new InvalidInput({ field, reason: "is not valid UTF-8" })
  })

/**
 * Parse JSON text with our strict parser (json.ts): a duplicate key, a number beyond
 * ±(2^53−1), a lone surrogate or nesting over 1,000 levels is refused, naming the field, the
 * JSON path and the position, never the text.
 */
export const parseJsonField = (field: string, text: string): Either.Either<unknown, InvalidInput> =>
  Either.mapLeft(
    parseJson(text),
    (error) => new InvalidInput({ field, reason: `not valid JSON: ${describeJsonError(error)}` })
  )

/**
 * Decode a structured input (an HTTP body), naming the field at the path Schema found wrong,
 * or `fallback` for the value as a whole.
 */
export const decodeNamed =
  <A, I>(fallback: string, schema: Schema.Schema<A, I>) =>
  (value: unknown): Effect.Effect<A, InvalidInput> =>
    Schema.decodeUnknown(schema, { errors: "first", onExcessProperty: "error" })(value).pipe(
      Effect.mapError((error) => {
        const { path, message } = parseIssue(error)
        return new InvalidInput({ field: path ?? fallback, reason: message })
      })
    )
