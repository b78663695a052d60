/**
 * The environment a provider's processes inherit: the worker's own, less what they must not
 * see. The queue's own secrets never reach them by default (the `RELAYKEEP_*` settings, among
 * them a PostgreSQL store URL with its password and the dashboard token, and libpq's `PG*`
 * variables, `PGPASSWORD` first); `--strip-env` removes more; `--pass-env` turns the rule
 * around into an allowlist. Names match case-insensitively, since a child may read either
 * spelling, and patterns take `*` for any run of characters (`AWS_*`).
 */
import { Either } from "effect"

/** Removed from every provider's environment unless `--pass-env` names the variable exactly. */
export const QueueSecrets: ReadonlyArray<string> = ["RELAYKEEP_*", "PG*"]

/** A variable name or a pattern of one: letters, digits, `_` and `*`, not starting with a digit. */
const NamePattern = /^[A-Za-z_*][A-Za-z0-9_*]*$/

/** Check one `--strip-env` or `--pass-env` entry; the reason names what is wrong with it. */
export const parseNamePattern = (text: string): Either.Either<string, string> => {
  const pattern = text.trim()
  return NamePattern.test(pattern)
    ? Either.right(pattern)
    : Either.left("must be a variable name or a pattern of letters, digits, _ and * (e.g. AWS_*)")
}

const matcher = (pattern: string): RegExp =>
  new RegExp(
    `^${pattern
      .split("*")
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"))
      .join(".*")}$`,
    "i"
  )

const anyOf = (patterns: ReadonlyArray<string>) => {
  const compiled = patterns.map(matcher)
  return (name: string) => compiled.some((pattern) => pattern.test(name))
}

export interface EnvironmentRule {
  /** Removed (names or patterns). */
  readonly strip: ReadonlyArray<string>
  /** When not empty, only these pass (names or patterns). */
  readonly pass: ReadonlyArray<string>
}

/**
 * What a provider sees of `environment`: with an allowlist, only what it matches; then less
 * what `strip` matches; then less the queue's secrets, unless the allowlist names one exactly
 * (`--pass-env PGHOST` for an agent that works on a database on purpose).
 */
export const providerEnvironment = (
  environment: Readonly<Record<string, string>>,
  rule: EnvironmentRule
): Record<string, string> => {
  const allowed = rule.pass.length === 0 ? () => true : anyOf(rule.pass)
  const stripped = anyOf(rule.strip)
  const secret = anyOf(QueueSecrets)
  const named = new Set(
    rule.pass.filter((pattern) => !pattern.includes("*")).map((name) => name.toUpperCase())
  )
  return Object.fromEntries(
    Object.entries(environment).filter(
      ([name]) => allowed(name) && !stripped(name) && (!secret(name) || named.has(name.toUpperCase()))
    )
  )
}
