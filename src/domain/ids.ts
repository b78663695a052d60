import { Schema } from "effect"
import { Text } from "./fields.js"

const Hex64 = /^[0-9a-f]{64}$/

/** A task id: the hex HMAC-SHA256 of a client request id under the root's secret. */
export const TaskId = Text.pipe(
  Schema.pattern(Hex64, { message: () => "must be 64 lowercase hex characters" }),
  Schema.brand("TaskId")
)
export type TaskId = typeof TaskId.Type

/** The SHA-256 of a payload's RFC 8785 canonical JSON, in hex. */
export const PayloadSha256 = Text.pipe(
  Schema.pattern(Hex64, { message: () => "must be 64 lowercase hex characters" }),
  Schema.brand("PayloadSha256")
)
export type PayloadSha256 = typeof PayloadSha256.Type

// Printable: no C0/C1 control characters.
// eslint-disable-next-line no-control-regex
export const Printable = /^[^\u0000-\u001f\u007f-\u009f]+$/u

/** Unpaired UTF-16 surrogates: they would all hash as U+FFFD, so distinct strings would collide. */
export const LoneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

export const MaxKeyChars = 200

/**
 * A key a caller chooses (a client request id, a memory record's id): 1–200 printable
 * characters of well-formed Unicode. The lengths are plain filters with their JSON Schema
 * keywords, not `minLength`/`maxLength`, whose internal titles would be advertised (fields.ts).
 */
export const PrintableKey = Text.pipe(
  Schema.filter((text) => !LoneSurrogate.test(text), {
    message: () => "must be well-formed Unicode",
    jsonSchema: {}
  }),
  Schema.filter((text) => text.length > 0, {
    message: () => "must not be empty",
    jsonSchema: { minLength: 1 }
  }),
  Schema.filter((text) => text.length <= MaxKeyChars, {
    message: () => `must be at most ${MaxKeyChars} characters`,
    jsonSchema: { maxLength: MaxKeyChars }
  }),
  Schema.pattern(Printable, { message: () => "must contain printable characters only" })
)

/** The caller's own idempotency key: 1–200 printable characters. */
export const ClientRequestId = PrintableKey.pipe(Schema.brand("ClientRequestId"))
export type ClientRequestId = typeof ClientRequestId.Type

export const isTaskId = Schema.is(TaskId)
export const isPayloadSha256 = Schema.is(PayloadSha256)
