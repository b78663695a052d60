import { Either } from "effect"

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
