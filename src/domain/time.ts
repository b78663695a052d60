import { Schema } from "effect"
import { Text } from "./fields.js"

/** An ISO-8601 UTC timestamp with milliseconds, as written by `isoTime`. */
export const Timestamp = Text.pipe(
  Schema.pattern(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, {
    message: () => "must be an ISO-8601 UTC timestamp",
    description: "an ISO-8601 UTC timestamp with milliseconds"
  })
)
export const isoTime = (millis: number): string => new Date(millis).toISOString()
export const timeMillis = (iso: string): number => Date.parse(iso)
