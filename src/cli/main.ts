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

/** The one line for stderr, scrubbed: a usage error or a foreign error may quote what it was given. */
export const describeFailure = (error: unknown): CliFailure => {
  const failure = describeRawFailure(error)
  return { line: redactMessage(failure.line), exitCode: failure.exitCode }
}

const describeRawFailure = (error: unknown): CliFailure => {
  if (ValidationError.isValidationError(error)) {
    return { line: `UsageError: ${oneLine(docText(error.error))}`, exitCode: 2 }
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
      Effect.catchAll((error) => Effect.succeed(Option.some(describeFailure(error)))),
      // A defect is a bug, but it still ends as one line on stderr, never on stdout.
      Effect.catchAllDefect((defect) =>
        Effect.as(
          Effect.logError("unexpected failure", defect),
          Option.some(describeFailure({ _tag: "Defect", message: String(defect) }))
        )
      )
    )
  })
