/** Options every command shares, and the store each command runs on. */
import { Options } from "@effect/cli"
import type { FileSystem } from "@effect/platform"
import * as Path from "@effect/platform/Path"
import { Config, Effect, Either, Layer, Option, ParseResult, Redacted, Schema } from "effect"
import { parseDuration } from "../domain/duration.js"
import type { StorageError } from "../domain/errors.js"
import { InvalidInput } from "../domain/errors.js"
import { envVariable, nonEmptyEnv } from "../platform/env.js"
import type { Host } from "../services/Host.js"
import { auditLogLayer } from "../mcp/auditLayer.js"
import type { TaskStore } from "../services/TaskStore.js"
import type { PgStoreOptions } from "../store/postgres/target.js"
import {
  DefaultMaxConnections,
  DefaultQueue,
  DefaultSchema,
  isPgUrl,
  pgTarget
} from "../store/postgres/target.js"
import { pgTaskStoreLayer } from "../store/postgres/layer.js"
import { fileTaskStoreLayer } from "../store/file/layer.js"

export const root = Options.text("root").pipe(
  Options.withFallbackConfig(envVariable("RELAYKEEP_ROOT")),
  Options.withDescription(
    "Data root (default: $RELAYKEEP_ROOT, else $XDG_DATA_HOME/relaykeep, else ~/.local/share/relaykeep)"
  ),
  Options.optional
)

/** `--root` (or RELAYKEEP_ROOT, read by the option), else $XDG_DATA_HOME/relaykeep, else ~/.local/share/relaykeep. */
export const resolveRoot = (option: Option.Option<string>) =>
  Effect.gen(function* () {
    const path = yield* Path.Path
    if (Option.isSome(option)) return path.resolve(option.value)
    const xdg = yield* nonEmptyEnv("XDG_DATA_HOME")
    if (Option.isSome(xdg)) return path.join(path.resolve(xdg.value), "relaykeep")
    const home = yield* nonEmptyEnv("HOME")
    if (Option.isSome(home)) return path.join(home.value, ".local", "share", "relaykeep")
    return yield* new InvalidInput({
      field: "--root",
      reason: "no --root, RELAYKEEP_ROOT, XDG_DATA_HOME or HOME"
    })
  })

/** A value of a flag or of the environment variable it falls back on, and which of the two it was. */
export interface Given<A> {
  readonly value: A
  /** The flag (`--store`) or the variable (`RELAYKEEP_STORE`): what an error about the value names. */
  readonly field: string
}

/**
 * An optional flag that falls back on an environment variable (an empty one counts as unset). The
 * value keeps its source, so that an error names what the user set, and a PostgreSQL flag on a
 * file store is refused while the same setting in the environment is not.
 */
const withEnvironment = <A>(
  flag: string,
  option: Options.Options<A>,
  variable: string,
  fromEnv: Config.Config<A>
) =>
  option.pipe(
    Options.map((value): Given<A> => ({ value, field: flag })),
    Options.withFallbackConfig(Config.map(fromEnv, (value): Given<A> => ({ value, field: variable }))),
    Options.optional
  )

const store = withEnvironment(
  "--store",
  Options.text("store"),
  "RELAYKEEP_STORE",
  envVariable("RELAYKEEP_STORE")
).pipe(
  Options.withDescription(
    "Where the queue lives: `file` (the default: the data root) or postgres://user@host:5432/db (default: $RELAYKEEP_STORE, else file)"
  )
)
const pgSchema = withEnvironment(
  "--pg-schema",
  Options.text("pg-schema"),
  "RELAYKEEP_PG_SCHEMA",
  envVariable("RELAYKEEP_PG_SCHEMA")
).pipe(
  Options.withDescription(
    `PostgreSQL schema for RelayKeep's tables (default: $RELAYKEEP_PG_SCHEMA, else ${DefaultSchema})`
  )
)
const queue = withEnvironment(
  "--queue",
  Options.text("queue"),
  "RELAYKEEP_QUEUE",
  envVariable("RELAYKEEP_QUEUE")
).pipe(
  Options.withDescription(
    `The queue, by name, in a PostgreSQL store (default: $RELAYKEEP_QUEUE, else ${DefaultQueue})`
  )
)
// The variable is read as text and judged with the other PostgreSQL settings, when the store is
// PostgreSQL: a file store is not refused for a pool size it never uses.
const pgPool = withEnvironment(
  "--pg-pool",
  Options.integer("pg-pool"),
  "RELAYKEEP_PG_POOL",
  Config.map(envVariable("RELAYKEEP_PG_POOL"), Number)
).pipe(
  Options.withDescription(
    `The most PostgreSQL connections this process opens, besides one for LISTEN (default: $RELAYKEEP_PG_POOL, else ${DefaultMaxConnections})`
  )
)

/** The options of every command that works on the queue: where the store is. */
export const storeOptions = { root, store, pgSchema, queue, pgPool }

/** The options that choose a PostgreSQL queue, for commands that name its URL otherwise. */
export const pgOptions = { pgSchema, queue, pgPool }

export interface StoreArgs {
  readonly root: Option.Option<string>
  readonly store: Option.Option<Given<string>>
  readonly pgSchema: Option.Option<Given<string>>
  readonly queue: Option.Option<Given<string>>
  readonly pgPool: Option.Option<Given<number>>
}

/** Whether a setting was given as this flag on the command line (not by its variable). */
const onCommandLine = (given: Option.Option<Given<unknown>>, flag: string) =>
  Option.exists(given, (g) => g.field === flag)

/** What `--store` (or RELAYKEEP_STORE) asks for: the file store, or PostgreSQL at a URL. */
export const resolveStore = (args: StoreArgs) =>
  Effect.gen(function* () {
    if (Option.isNone(args.store) || args.store.value.value === "file") {
      // A PostgreSQL flag without PostgreSQL is a mistake worth naming, not ignoring.
      for (const [flag, given] of [
        ["--pg-schema", args.pgSchema],
        ["--queue", args.queue],
        ["--pg-pool", args.pgPool]
      ] as const)
        if (onCommandLine(given, flag))
          return yield* new InvalidInput({ field: flag, reason: "applies to a postgres:// --store only" })
      return { _tag: "file" as const, root: yield* resolveRoot(args.root) }
    }
    const { value, field } = args.store.value
    return { _tag: "postgres" as const, ...(yield* resolvePg(value, field, args)) }
  })

export type PgArgs = Pick<StoreArgs, "pgSchema" | "queue" | "pgPool">

/**
 * A PostgreSQL store at `url` (given as `urlField`) with the schema, queue and pool of the
 * flags or the environment, validated here so that a bad name is a usage error before
 * anything connects.
 */
export const resolvePg = (url: string, urlField: string, args: PgArgs) =>
  Effect.gen(function* () {
    if (!isPgUrl(url))
      return yield* new InvalidInput({ field: urlField, reason: "must be `file` or a postgres:// URL" })
    const value = <A>(given: Option.Option<Given<A>>) =>
      Option.getOrUndefined(Option.map(given, (g) => g.value))
    const options: PgStoreOptions = {
      url: Redacted.make(url),
      schema: value(args.pgSchema),
      queue: value(args.queue),
      maxConnections: value(args.pgPool)
    }
    // The target names flags; a value that came from a variable is blamed on the variable.
    const fieldOf = (given: Option.Option<Given<unknown>>, flag: string) =>
      Option.getOrElse(
        Option.map(given, (g) => g.field),
        () => flag
      )
    const target = yield* Either.mapLeft(pgTarget(options), (error) => {
      const field =
        error.field === "maxConnections"
          ? fieldOf(args.pgPool, "--pg-pool")
          : error.field === "--store"
            ? urlField
            : error.field === "--pg-schema"
              ? fieldOf(args.pgSchema, "--pg-schema")
              : error.field === "--queue"
                ? fieldOf(args.queue, "--queue")
                : error.field
      return field === error.field ? error : new InvalidInput({ field, reason: error.reason })
    })
    return { options, target }
  })

/** The store the flags and environment choose: what every queue command runs on. */
export const storeLayer = (args: StoreArgs) =>
  Layer.unwrapEffect(
    Effect.map(
      resolveStore(args),
      (
        chosen
      ): Layer.Layer<TaskStore, StorageError | InvalidInput, Host | FileSystem.FileSystem | Path.Path> =>
        chosen._tag === "file" ? fileTaskStoreLayer({ root: chosen.root }) : pgTaskStoreLayer(chosen.options)
    )
  )

/**
 * A flag's text decoded by `parse`, or a usage error that is one sentence naming the flag:
 * `--lease: must be longer than zero`, without the formatter's tree of schemas.
 */
export const ParsedText = <A>(
  flag: string,
  to: Schema.Schema<A>,
  parse: (text: string) => Either.Either<A, string>,
  format: (value: A) => string
) =>
  Schema.transformOrFail(Schema.String, to, {
    strict: true,
    decode: (text, _, ast) =>
      Either.match(parse(text), {
        onLeft: () => ParseResult.fail(new ParseResult.Type(ast, text)),
        onRight: ParseResult.succeed
      }),
    encode: (value) => ParseResult.succeed(format(value))
  }).pipe(
    Schema.annotations({
      message: (issue) =>
        `${flag}: ${Either.match(parse(String(issue.actual)), {
          onLeft: (reason) => reason,
          onRight: () => "is invalid"
        })}`
    })
  )

/** Text as milliseconds (`90s`, `5m`, `2h`, or seconds), or a message naming `flag`. */
export const DurationMillis = (flag: string, parse = parseDuration) =>
  ParsedText(flag, Schema.Number, parse, (millis) => `${millis}ms`)

/** A duration option (`90s`, `5m`, `2h`, or seconds), as milliseconds. */
export const duration = (name: string, fallback: string) =>
  Options.text(name).pipe(Options.withDefault(fallback), Options.withSchema(DurationMillis(`--${name}`)))

/** The audit log under the resolved root: `<root>/audit/`. */
export const auditLayer = (option: Option.Option<string>) =>
  Layer.unwrapEffect(Effect.map(resolveRoot(option), (dir) => auditLogLayer(`${dir}/audit`)))

/** A whole number from `min` to `max`, or a message naming `flag`. */
export const IntegerBetween = (flag: string, min: number, max: number) =>
  Schema.Int.pipe(Schema.between(min, max, { message: () => `${flag}: must be from ${min} to ${max}` }))

/** A whole number within bounds, or a usage error naming the flag (the bounds MCP's tools use). */
export const integerBetween = (name: string, min: number, max: number) =>
  Options.integer(name).pipe(Options.withSchema(IntegerBetween(`--${name}`, min, max)))
