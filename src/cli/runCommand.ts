/**
 * `Command.run` with RelayKeep's help (src/cli/help.ts) in place of the library's, for every
 * command: asked for with `--help`/`-h`, or shown for a command run without its subcommand.
 * Bold only on a terminal, and never with NO_COLOR set (https://no-color.org).
 */
import { CliConfig, Command, CommandDescriptor, HelpDoc, ValidationError } from "@effect/cli"
import type { Usage } from "@effect/cli/Usage"
import * as Terminal from "@effect/platform/Terminal"
import { Cause, Console, Effect, Option } from "effect"
import { nonEmptyEnv } from "../platform/env.js"
import { docText, readHelpDoc, renderHelp } from "./help.js"

/** Built-in options are left out of each command's list; the root's help names them once. */
const config = CliConfig.make({ showBuiltIns: false })

const HelpFlags: ReadonlySet<string> = new Set(["-h", "--help"])

/** The column help wraps at: readable in a pipe and in any terminal. */
const Width = 80

const commandName = (usage: Usage): Option.Option<string> => {
  switch (usage._tag) {
    case "Named":
      return Option.fromNullable(usage.names[0])
    case "Concat":
      return Option.orElse(commandName(usage.left), () => commandName(usage.right))
    default:
      return Option.none()
  }
}

export interface App {
  readonly name: string
  readonly version: string
}

/**
 * Run `command` on `argv` (as process.argv). Help goes to stdout as text: escape codes only
 * when stdout is a terminal and NO_COLOR is unset or empty.
 */
export const runCommand = <Name extends string, R, E, A>(
  command: Command.Command<Name, R, E, A>,
  app: App
) => {
  const showHelp = (args: ReadonlyArray<string>, usage: Usage, doc: HelpDoc.HelpDoc) =>
    Effect.gen(function* () {
      const terminal = yield* Terminal.Terminal
      const colour = (yield* terminal.isTTY) && Option.isNone(yield* nonEmptyEnv("NO_COLOR"))
      const name = Option.getOrElse(commandName(usage), () => app.name)
      // The words typed before the command's own name (`audit` before `list`); the root has none.
      const index = args.indexOf(name)
      const parents = name === app.name ? [] : [app.name, ...(index < 0 ? [] : args.slice(0, index))]
      const page = {
        title: `${app.name} ${app.version}`,
        parents,
        usage,
        doc,
        ...(parents.length === 0
          ? {
              footer: `${app.name} COMMAND --help shows a command's options; ${app.name} --version the version.`
            }
          : {})
      }
      yield* Console.log(renderHelp(page, { colour, width: Width }))
    })

  /** The words before the first option: the command and subcommand named (`audit list`). */
  const commandWords = (args: ReadonlyArray<string>) => {
    const first = args.findIndex((arg) => arg.startsWith("-"))
    return first < 0 ? args : args.slice(0, first)
  }

  /** The help the library's own parse finds in `args`, if they ask for help. */
  const helpIn = (args: ReadonlyArray<string>) =>
    Effect.map(
      Effect.option(CommandDescriptor.parse(command.descriptor, [app.name, ...args], config)),
      Option.flatMap((directive) =>
        directive._tag === "BuiltIn" && directive.option._tag === "ShowHelp"
          ? Option.some(directive.option)
          : Option.none()
      )
    )

  /**
   * The library's error for a value that is not one of an option's choices does not say which
   * option; the command's help does, and the command line gives the value that is not a choice.
   * A bad variable is named as a bad flag is.
   */
  const plainUsageError = (args: ReadonlyArray<string>, error: ValidationError.ValidationError) =>
    Effect.gen(function* () {
      const text = docText(error.error)
      // A bad environment variable behind an option comes as Effect's ConfigError text; it is
      // said the way a bad flag is: `RELAYKEEP_TASK_TIMEOUT: is not a duration (…)`.
      const variable = /^\(Invalid data at ([A-Za-z0-9_]+): "(.*)"\)$/s.exec(text)
      if (variable !== null)
        return ValidationError.invalidValue(HelpDoc.p(`${variable[1] ?? ""}: ${variable[2] ?? ""}`))
      const cases = /^Expected one of the following cases: (.*)$/.exec(text)?.[1]
      if (cases === undefined) return error
      const help = yield* helpIn([...commandWords(args), "--help"])
      if (Option.isNone(help)) return error
      const choices = cases.split(", ")
      const flags = readHelpDoc(help.value.helpDoc)
        .options.filter((entry) => entry.heading.endsWith(` ${choices.join("|")}`))
        .flatMap((entry) => entry.names)
      for (const [i, arg] of args.entries()) {
        const [flag = "", inline] = arg.split("=", 2)
        const value = inline ?? args[i + 1]
        if (flags.includes(flag) && value !== undefined && !choices.includes(value))
          return ValidationError.invalidValue(HelpDoc.p(`${flag}: ${text}`))
      }
      return error
    })

  return (argv: ReadonlyArray<string>) =>
    Effect.gen(function* () {
      const args = argv.slice(2)
      if (args.some((arg) => HelpFlags.has(arg))) {
        // The library's own parse decides whether this is a request for help, and whose. It
        // only sees a help flag right after the command's name; one given after other options
        // (`list --root DIR --help`) asks for the same help, so it is tried there too.
        const asGiven = yield* helpIn(args)
        const found = Option.isSome(asGiven) ? asGiven : yield* helpIn([...commandWords(args), "--help"])
        if (Option.isSome(found)) return yield* showHelp(args, found.value.usage, found.value.helpDoc)
      }
      // A command with subcommands but none given fails with HelpRequested; its help is shown
      // here, before the library would show its own.
      const withHelp = Command.transformHandler(command, (effect) =>
        Effect.catchAllCause(effect, (cause) => {
          const failure = Cause.failureOption(cause)
          if (
            Option.isSome(failure) &&
            ValidationError.isValidationError(failure.value) &&
            ValidationError.isHelpRequested(failure.value)
          ) {
            const requested = failure.value.command
            return showHelp(
              args,
              CommandDescriptor.getUsage(requested),
              CommandDescriptor.getHelp(requested, config)
            )
          }
          return Effect.failCause(cause)
        })
      )
      return yield* Command.run(
        withHelp,
        app
      )(argv).pipe(
        Effect.catchIf(ValidationError.isValidationError, (error) =>
          Effect.flatMap(plainUsageError(args, error), Effect.fail)
        )
      )
    })
}
