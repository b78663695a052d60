/**
 * The bins' logger: Effect's pretty logger on stderr, with every message and cause scrubbed by
 * the text rules of redaction first, since a logged error may quote the input that caused it.
 */
import { Cause, Logger } from "effect"
import { redactMessage } from "../domain/redact.js"

const scrub = (message: unknown): unknown =>
  Array.isArray(message)
    ? message.map(scrub)
    : typeof message === "string"
      ? redactMessage(message)
      : message instanceof Error
        ? redactMessage(String(message))
        : message

export const redactedStderrLogger = Logger.prettyLogger({ stderr: true }).pipe(
  Logger.mapInputOptions((options) =>
    Cause.isEmpty(options.cause)
      ? { ...options, message: scrub(options.message) }
      : {
          ...options,
          // The cause is printed as text here, so that it is scrubbed like the message.
          message: [...[scrub(options.message)].flat(), redactMessage(Cause.pretty(options.cause))],
          cause: Cause.empty
        }
  )
)
