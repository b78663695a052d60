/** The CLI as one effect: run the command line, and turn any failure into one line and an exit code. */
import { ValidationError } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { redactMessage } from "../domain/redact.js"
import { run } from "./Cli.js"
import { docText } from "./help.js"

export interface CliFailure {
  /** `Tag: message`, on one line. */
  readonly line: string
  /** 2 for usage errors (bad flags, bad input), 1 for domain and storage errors. */
  readonly exitCode: 1 | 2
}

const oneLine = (text: string): string => text.replace(/\s+/g, " ").trim()

/**
 * A library message about a value that quotes the value but not the flag (`'abc' is not a
 * integer`, `Path 'x' must exist`), with the flag `args` gave it to in front.
 */
export const withFlag = (text: string, args: ReadonlyArray<string>): string => {
  const quoted = /'([^']*)'/.exec(text)?.[1]
  if (quoted === undefined || /(^|\s)--[a-z]/.test(text)) return text
  for (const [i, arg] of args.entries()) {
    const before = args[i - 1] ?? ""
    if (arg.startsWith("--") && arg.endsWith(`=${quoted}`))
      return `${arg.slice(0, arg.indexOf("="))}: ${text}`
    if (arg === quoted && before.startsWith("-")) return `${before}: ${text}`
  }
  return text
}

/** The one line for stderr, scrubbed: a usage error or a foreign error may quote what it was given. */
export const describeFailure = (error: unknown, args: ReadonlyArray<string> = []): CliFailure => {
  const failure = describeRawFailure(error, args)
  return { line: redactMessage(failure.line), exitCode: failure.exitCode }
}

const describeRawFailure = (error: unknown, args: ReadonlyArray<string>): CliFailure => {
  if (ValidationError.isValidationError(error)) {
    return { line: `UsageError: ${withFlag(oneLine(docText(error.error)), args)}`, exitCode: 2 }
  }
  if (typeof error === "object" && error !== null && "_tag" in error && typeof error._tag === "string") {
    const message = "message" in error && typeof error.message === "string" ? error.message : ""
    return { line: `${error._tag}: ${oneLine(message)}`, exitCode: error._tag === "InvalidInput" ? 2 : 1 }
  }
  return { line: `Error: ${oneLine(String(error))}`, exitCode: 1 }
}

/**
 * Run `argv` (as process.argv) and return the failure to report, if any. @effect/cli prints
 * its own multi-line help on a usage error; that is silenced so stderr carries one line.
 */
export const runCli = (argv: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const console = yield* Console.consoleWith(Effect.succeed)
    return yield* run(argv).pipe(
      Console.withConsole({ ...console, error: () => Effect.void }),
      Effect.as(Option.none<CliFailure>()),
      Effect.catchAll((error) => Effect.succeed(Option.some(describeFailure(error, argv.slice(2))))),
      // A defect is a bug, but it still ends as one line on stderr, never on stdout.
      Effect.catchAllDefect((defect) =>
        Effect.as(
          Effect.logError("unexpected failure", defect),
          Option.some(describeFailure({ _tag: "Defect", message: String(defect) }))
        )
      )
    )
  })
