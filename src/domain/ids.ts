import { Schema } from "effect"

const Hex64 = /^[0-9a-f]{64}$/

/** A task id: the hex HMAC-SHA256 of a client request id under the root's secret. */
export const TaskId = Schema.String.pipe(
  Schema.pattern(Hex64, { message: () => "must be 64 lowercase hex characters" }),
  Schema.brand("TaskId")
)
export type TaskId = typeof TaskId.Type

/** The SHA-256 of a payload's RFC 8785 canonical JSON, in hex. */
export const PayloadSha256 = Schema.String.pipe(
  Schema.pattern(Hex64, { message: () => "must be 64 lowercase hex characters" }),
  Schema.brand("PayloadSha256")
)
export type PayloadSha256 = typeof PayloadSha256.Type

// Printable: no C0/C1 control characters.
// eslint-disable-next-line no-control-regex
export const Printable = /^[^\u0000-\u001f\u007f-\u009f]+$/u

/** Unpaired UTF-16 surrogates: they would all hash as U+FFFD, so distinct strings would collide. */
export const LoneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** The caller's own idempotency key: 1–200 printable characters. */
export const ClientRequestId = Schema.String.pipe(
  Schema.filter((text) => !LoneSurrogate.test(text), { message: () => "must be well-formed Unicode" }),
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(200, { message: () => "must be at most 200 characters" }),
  Schema.pattern(Printable, { message: () => "must contain printable characters only" }),
  Schema.brand("ClientRequestId")
)
export type ClientRequestId = typeof ClientRequestId.Type

export const isTaskId = Schema.is(TaskId)
