/** @effect/cli options parsed as a command's would be, in an environment of the test's choosing. */
import { CliConfig, CommandDescriptor, ValidationError } from "@effect/cli"
import type { Options } from "@effect/cli"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import { docText } from "../../src/cli/help.js"

/** Parse `args` with `options` as a command's, in an environment holding exactly `env`. */
export const parseOptions = <A>(
  options: Options.Options<A>,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
) =>
  CommandDescriptor.parse(CommandDescriptor.make("t", options), ["t", ...args], CliConfig.defaultConfig).pipe(
    Effect.flatMap((directive) =>
      directive._tag !== "UserDefined"
        ? Effect.dieMessage(`not a command: ${directive._tag}`)
        : directive.leftover.length > 0
          ? Effect.dieMessage(`arguments not taken by any option: ${directive.leftover.join(" ")}`)
          : Effect.succeed(directive.value.options)
    ),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
    Effect.provide(NodeContext.layer)
  )

/** The text of the usage error that parsing `args` fails with. */
export const usageErrorOf = <A>(
  options: Options.Options<A>,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
) =>
  Effect.map(Effect.flip(parseOptions(options, args, env)), (error) => {
    assert.isTrue(ValidationError.isValidationError(error))
    return docText(error.error)
  })
