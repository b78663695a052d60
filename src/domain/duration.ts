import { Either } from "effect"
import { InvalidInput } from "./errors.js"

const Units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/**
 * A duration as the CLI accepts it: `90s`, `5m`, `2h`, `30d`, `250ms`, or a plain number of seconds.
 * Returns milliseconds, or the reason it is not a duration.
 */
export const parseDuration = (text: string): Either.Either<number, string> => {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim())
  const amount = match?.[1]
  if (amount === undefined) return Either.left("is not a duration (try 90s, 5m, 2h)")
  const millis = Math.round(Number(amount) * (Units[match?.[2] ?? "s"] ?? 1000))
  return millis > 0 ? Either.right(millis) : Either.left("must be longer than zero")
}

const BareNumber = /^\s*\d+(?:\.\d+)?\s*$/

/** Whether a duration or date names no unit: a bare number. */
export const isBareNumber = (text: string): boolean => BareNumber.test(text)

export const BareNumberReason = "must name its unit (e.g. 30d or 12h): a bare number would mean seconds"

/**
 * A duration that must name its unit (`30d`, not `30`): for what removes tasks (`gc
 * --finished-before`, a worker's `--retention`), where a bare number, read as seconds, would
 * remove nearly everything.
 */
export const parseDurationWithUnit = (text: string): Either.Either<number, string> =>
  isBareNumber(text) ? Either.left(BareNumberReason) : parseDuration(text)

/**
 * A point in time as `--since` and the dashboard's `since` take it: an ISO date or date-time
 * (`2026-11-30`, `2026-11-30T08:00:00Z`), or a duration meaning that long before `nowMillis`
 * (`24h`, `7d`). Epoch milliseconds, or `InvalidInput` naming `field`.
 */
export const sinceMillisAt = (
  text: string,
  nowMillis: number,
  field: string
): Either.Either<number, InvalidInput> => {
  const ago = parseDuration(text)
  if (Either.isRight(ago)) return Either.right(nowMillis - ago.right)
  const at = Date.parse(text)
  return Number.isNaN(at)
    ? Either.left(new InvalidInput({ field, reason: "not a date, time or duration" }))
    : Either.right(at)
}
