/**
 * The shared CLI options as @effect/cli parses them: a bad value is a usage error that names the
 * flag, and a setting left off the command line is taken from its environment variable, which
 * an error then names instead.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { duration, integerBetween, resolveStore, storeOptions } from "../../src/cli/options.js"
import { parseOptions, usageErrorOf } from "../support/options.js"

describe("option schemas", () => {
  it.effect("a whole number out of bounds names the flag and the bounds", () =>
    Effect.gen(function* () {
      const limit = integerBetween("limit", 1, 500)
      assert.strictEqual(yield* parseOptions(limit, ["--limit", "500"]), 500)
      assert.strictEqual(yield* usageErrorOf(limit, ["--limit", "0"]), "--limit: must be from 1 to 500")
      assert.strictEqual(yield* usageErrorOf(limit, ["--limit", "501"]), "--limit: must be from 1 to 500")
    })
  )

  it.effect("a duration is milliseconds; a bad one is one sentence naming the flag", () =>
    Effect.gen(function* () {
      const lease = duration("lease", "60s")
      assert.strictEqual(yield* parseOptions(lease, []), 60_000)
      assert.strictEqual(yield* parseOptions(lease, ["--lease", "5m"]), 300_000)
      assert.strictEqual(yield* usageErrorOf(lease, ["--lease", "0"]), "--lease: must be longer than zero")
      assert.strictEqual(
        yield* usageErrorOf(lease, ["--lease", "soon"]),
        "--lease: is not a duration (try 90s, 5m, 2h)"
      )
    })
  )
})

describe("store options and their environment variables", () => {
  const store = (args: ReadonlyArray<string>, env?: Readonly<Record<string, string>>) =>
    parseOptions(storeOptions.store, args, env)

  it.effect("the flag wins over the variable; each value says where it came from", () =>
    Effect.gen(function* () {
      const env = { RELAYKEEP_STORE: "postgres://env@127.0.0.1/db" }
      assert.deepStrictEqual(
        yield* store(["--store", "file"], env),
        Option.some({ value: "file", field: "--store" })
      )
      assert.deepStrictEqual(
        yield* store([], env),
        Option.some({ value: "postgres://env@127.0.0.1/db", field: "RELAYKEEP_STORE" })
      )
      assert.deepStrictEqual(yield* store([]), Option.none())
    })
  )

  it.effect("an empty variable counts as unset", () =>
    Effect.gen(function* () {
      assert.deepStrictEqual(yield* store([], { RELAYKEEP_STORE: "" }), Option.none())
      assert.deepStrictEqual(
        yield* parseOptions(storeOptions.root, [], { RELAYKEEP_ROOT: "" }),
        Option.none()
      )
      assert.deepStrictEqual(
        yield* parseOptions(storeOptions.root, [], { RELAYKEEP_ROOT: "/data" }),
        Option.some("/data")
      )
    })
  )

  const args = (env: Readonly<Record<string, string>>, flags: ReadonlyArray<string> = []) =>
    Effect.all({
      root: parseOptions(storeOptions.root, ["--root", "/tmp/r"], env),
      store: parseOptions(storeOptions.store, flags.includes("--store") ? flags : [], env),
      pgSchema: parseOptions(storeOptions.pgSchema, flags.includes("--pg-schema") ? flags : [], env),
      queue: parseOptions(storeOptions.queue, [], env),
      pgPool: parseOptions(storeOptions.pgPool, [], env)
    })

  it.effect("a bad store names the variable it came from", () =>
    Effect.gen(function* () {
      const given = yield* args({ RELAYKEEP_STORE: "mysql://x" })
      const error = yield* Effect.flip(resolveStore(given).pipe(Effect.provide(NodeContext.layer)))
      assert.strictEqual(error._tag, "InvalidInput")
      assert.include(error.message, "RELAYKEEP_STORE")
    })
  )

  it.effect("a PostgreSQL flag on a file store is refused; the same variable is not", () =>
    Effect.gen(function* () {
      const fromEnv = yield* args({ RELAYKEEP_PG_SCHEMA: "elsewhere", RELAYKEEP_PG_POOL: "junk" })
      const chosen = yield* resolveStore(fromEnv).pipe(Effect.provide(NodeContext.layer))
      assert.deepStrictEqual(chosen, { _tag: "file", root: "/tmp/r" })
      const fromFlag = yield* args({}, ["--pg-schema", "elsewhere"])
      const refused = yield* Effect.either(resolveStore(fromFlag).pipe(Effect.provide(NodeContext.layer)))
      assert.isTrue(Either.isLeft(refused))
      if (Either.isLeft(refused)) assert.include(refused.left.message, "--pg-schema")
    })
  )
})
