/** Where a PostgreSQL store lives: the server, the schema in its database, the queue in the schema. */
import { Either, Redacted } from "effect"
import { InvalidInput } from "../../domain/errors.js"

export interface PgStoreOptions {
  /** `postgres://user:password@host:port/database` (also `postgresql://`). */
  readonly url: Redacted.Redacted<string>
  /** The schema that holds RelayKeep's tables (default `relaykeep`). */
  readonly schema?: string | undefined
  /** The queue in that schema (default `default`); queues share tables, never tasks. */
  readonly queue?: string | undefined
  /** The most connections this process opens (default 5), besides one for LISTEN. */
  readonly maxConnections?: number | undefined
  /** How long to wait for a connection to open (default 10 s). */
  readonly connectTimeoutMillis?: number | undefined
  readonly maxPayloadBytes?: number | undefined
}

export const DefaultSchema = "relaykeep"
export const DefaultQueue = "default"
export const DefaultMaxConnections = 5
export const DefaultConnectTimeoutMillis = 10_000

/** A validated target. `display` names it in messages, without the password. */
export interface PgTarget {
  readonly url: Redacted.Redacted<string>
  readonly display: string
  readonly schema: string
  readonly queue: string
}

/** Lower case, so it needs no quoting anywhere (psql, regclass, logs). */
const SchemaName = /^[a-z_][a-z0-9_]{0,62}$/
/** It travels in NOTIFY payloads and log lines: keep it plain. */
const QueueName = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$/

export const isPgUrl = (text: string): boolean => /^postgres(ql)?:\/\//.test(text)

/** The URL without its password: `postgres://user@host:5432/db`. */
export const displayUrl = (text: string): string => {
  try {
    const url = new URL(text)
    url.password = ""
    url.search = ""
    return url.toString()
  } catch {
    return "postgres://(unparsable URL)"
  }
}

export const pgTarget = (options: PgStoreOptions): Either.Either<PgTarget, InvalidInput> => {
  const url = Redacted.value(options.url)
  const schema = options.schema ?? DefaultSchema
  const queue = options.queue ?? DefaultQueue
  if (!isPgUrl(url))
    return Either.left(
      new InvalidInput({ field: "--store", reason: "must be a postgres:// or postgresql:// URL" })
    )
  try {
    new URL(url)
  } catch {
    return Either.left(new InvalidInput({ field: "--store", reason: "is not a valid URL" }))
  }
  if (!SchemaName.test(schema))
    return Either.left(
      new InvalidInput({
        field: "--pg-schema",
        reason: "must be 1-63 characters of a-z, 0-9 and _, not starting with a digit"
      })
    )
  if (schema.startsWith("pg_") || schema === "information_schema" || schema === "public")
    return Either.left(
      new InvalidInput({
        field: "--pg-schema",
        reason: `${schema} belongs to PostgreSQL or to everyone; give RelayKeep a schema of its own`
      })
    )
  if (!QueueName.test(queue))
    return Either.left(
      new InvalidInput({
        field: "--queue",
        reason: "must be 1-100 characters of A-Z, a-z, 0-9, _, . and -, starting with a letter or digit"
      })
    )
  for (const [field, value] of [
    ["maxConnections", options.maxConnections],
    ["connectTimeoutMillis", options.connectTimeoutMillis]
  ] as const) {
    if (value !== undefined && (!Number.isInteger(value) || value < 1))
      return Either.left(new InvalidInput({ field, reason: "must be a positive integer" }))
  }
  return Either.right({
    url: options.url,
    display: `${displayUrl(url)} schema ${schema} queue ${queue}`,
    schema,
    queue
  })
}
