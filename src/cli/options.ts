/** Options every command shares, and the store each command runs on. */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import type { FileSystem } from "@effect/platform"
import * as Path from "@effect/platform/Path"
import { Effect, Either, Layer, Option, Redacted } from "effect"
import { parseDuration } from "../domain/duration.js"
import type { StorageError } from "../domain/errors.js"
import { InvalidInput } from "../domain/errors.js"
import { nonEmptyEnv } from "../platform/env.js"
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
  Options.withDescription(
    "Data root (default: $RELAYKEEP_ROOT, else $XDG_DATA_HOME/relaykeep, else ~/.local/share/relaykeep)"
  ),
  Options.optional
)

/** `--root`, else RELAYKEEP_ROOT, else $XDG_DATA_HOME/relaykeep, else ~/.local/share/relaykeep. */
export const resolveRoot = (option: Option.Option<string>) =>
  Effect.gen(function* () {
    const path = yield* Path.Path
    if (Option.isSome(option)) return path.resolve(option.value)
    const env = nonEmptyEnv
    const explicit = yield* env("RELAYKEEP_ROOT")
    if (Option.isSome(explicit)) return path.resolve(explicit.value)
    const xdg = yield* env("XDG_DATA_HOME")
    if (Option.isSome(xdg)) return path.join(path.resolve(xdg.value), "relaykeep")
    const home = yield* env("HOME")
    if (Option.isSome(home)) return path.join(home.value, ".local", "share", "relaykeep")
    return yield* new InvalidInput({
      field: "--root",
      reason: "no --root, RELAYKEEP_ROOT, XDG_DATA_HOME or HOME"
    })
  })

const store = Options.text("store").pipe(
  Options.withDescription(
    "Where the queue lives: `file` (the default: the data root) or postgres://user@host:5432/db (default: $RELAYKEEP_STORE, else file)"
  ),
  Options.optional
)
const pgSchema = Options.text("pg-schema").pipe(
  Options.withDescription(
    `PostgreSQL schema for RelayKeep's tables (default: $RELAYKEEP_PG_SCHEMA, else ${DefaultSchema})`
  ),
  Options.optional
)
const queue = Options.text("queue").pipe(
  Options.withDescription(
    `The queue, by name, in a PostgreSQL store (default: $RELAYKEEP_QUEUE, else ${DefaultQueue})`
  ),
  Options.optional
)
const pgPool = Options.integer("pg-pool").pipe(
  Options.withDescription(
    `The most PostgreSQL connections this process opens, besides one for LISTEN (default: $RELAYKEEP_PG_POOL, else ${DefaultMaxConnections})`
  ),
  Options.optional
)

/** The options of every command that works on the queue: where the store is. */
export const storeOptions = { root, store, pgSchema, queue, pgPool }

/** The options that choose a PostgreSQL queue, for commands that name its URL otherwise. */
export const pgOptions = { pgSchema, queue, pgPool }

export interface StoreArgs {
  readonly root: Option.Option<string>
  readonly store: Option.Option<string>
  readonly pgSchema: Option.Option<string>
  readonly queue: Option.Option<string>
  readonly pgPool: Option.Option<number>
}

/** A flag, else its environment variable, else nothing. */
const flagOrEnv = (flag: Option.Option<string>, variable: string) =>
  Option.isSome(flag) ? Effect.succeed(flag) : nonEmptyEnv(variable)

/** What `--store` (or RELAYKEEP_STORE) asks for: the file store, or PostgreSQL at a URL. */
export const resolveStore = (args: StoreArgs) =>
  Effect.gen(function* () {
    const chosen = yield* flagOrEnv(args.store, "RELAYKEEP_STORE")
    const field = Option.isSome(args.store) ? "--store" : "RELAYKEEP_STORE"
    const pgOnly: ReadonlyArray<readonly [string, boolean]> = [
      ["--pg-schema", Option.isSome(args.pgSchema)],
      ["--queue", Option.isSome(args.queue)],
      ["--pg-pool", Option.isSome(args.pgPool)]
    ]
    if (Option.isNone(chosen) || chosen.value === "file") {
      // A PostgreSQL flag without PostgreSQL is a mistake worth naming, not ignoring.
      for (const [flag, given] of pgOnly)
        if (given)
          return yield* new InvalidInput({ field: flag, reason: "applies to a postgres:// --store only" })
      return { _tag: "file" as const, root: yield* resolveRoot(args.root) }
    }
    return { _tag: "postgres" as const, ...(yield* resolvePg(chosen.value, field, args)) }
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
    const poolText = yield* nonEmptyEnv("RELAYKEEP_PG_POOL")
    const pool = Option.isSome(args.pgPool)
      ? args.pgPool.value
      : Option.isSome(poolText)
        ? Number(poolText.value)
        : undefined
    const options: PgStoreOptions = {
      url: Redacted.make(url),
      schema: Option.getOrUndefined(yield* flagOrEnv(args.pgSchema, "RELAYKEEP_PG_SCHEMA")),
      queue: Option.getOrUndefined(yield* flagOrEnv(args.queue, "RELAYKEEP_QUEUE")),
      maxConnections: pool
    }
    const target = yield* Either.mapLeft(pgTarget(options), (error) =>
      error.field === "maxConnections"
        ? new InvalidInput({
            field: Option.isSome(args.pgPool) ? "--pg-pool" : "RELAYKEEP_PG_POOL",
            reason: error.reason
          })
        : error.field === "--store"
          ? new InvalidInput({ field: urlField, reason: error.reason })
          : error
    )
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

/** A duration option (`90s`, `5m`, `2h`, or seconds), as milliseconds. */
export const duration = (name: string, fallback: string) =>
  Options.text(name).pipe(
    Options.withDefault(fallback),
    Options.mapEffect((text) =>
      Either.match(parseDuration(text), {
        onLeft: (reason) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: ${reason}`))),
        onRight: Effect.succeed
      })
    )
  )

/** The audit log under the resolved root: `<root>/audit/`. */
export const auditLayer = (option: Option.Option<string>) =>
  Layer.unwrapEffect(Effect.map(resolveRoot(option), (dir) => auditLogLayer(`${dir}/audit`)))

/** A whole number within bounds, or a usage error naming the flag (the bounds MCP's tools use). */
export const integerBetween = (name: string, min: number, max: number) =>
  Options.integer(name).pipe(
    Options.mapEffect((value) =>
      value >= min && value <= max
        ? Effect.succeed(value)
        : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: must be from ${min} to ${max}`)))
    )
  )
