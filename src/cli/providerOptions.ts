/**
 * The provider flags of `relaykeep worker` and `doctor`. Each is decoded by @effect/cli, and
 * one left off the command line falls back on its environment variable, decoded the same way
 * (src/providers/config.ts holds the variables; `<root>/config.json` comes after both).
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import { Config, Effect, Either, Layer, Option, Schema } from "effect"
import { parseAbsolutePath, parseSize, providerVariables } from "../providers/config.js"
import { parseNamePattern } from "../providers/environment.js"
import { parseLoopbackUrl } from "../providers/settings.js"
import { DurationMillis, ParsedText } from "./options.js"

/** A flag that, when left off the command line, takes its variable's value (or none). */
const orVariable = <A>(option: Options.Options<A>, variable: Config.Config<A>, description: string) =>
  option.pipe(Options.withFallbackConfig(variable), Options.withDescription(description), Options.optional)

/** A usage error in the words a bad flag's value gets: `--strip-env: must be …`. */
const usageError = (message: string) => ValidationError.invalidValue(HelpDoc.p(message))

/**
 * A repeatable flag whose every value `parse` checks (the first bad one is the usage error), and
 * which, when not given at all, takes its variable's list (or none). `Options.withFallbackConfig`
 * cannot serve here: it falls back when an option reports a missing value, and a repeated option
 * never does (it reports an empty list), so the same Config is read here for the empty list, and
 * its error becomes the same usage error.
 */
const repeatedOrVariable = (
  name: string,
  parse: (text: string) => Either.Either<string, string>,
  variable: Config.Config<ReadonlyArray<string>> | undefined,
  description: string
) =>
  Options.text(name).pipe(
    Options.repeated,
    Options.mapEffect((values) => {
      if (values.length === 0)
        return variable === undefined
          ? Effect.succeedNone
          : Effect.mapError(Config.option(variable), (error) => usageError(String(error)))
      return Either.match(Either.all(values.map(parse)), {
        onLeft: (reason) => Effect.fail(usageError(`--${name}: ${reason}`)),
        onRight: (checked) => Effect.succeed(Option.some<ReadonlyArray<string>>(checked))
      })
    }),
    Options.withDescription(description)
  )

const url = (name: string) =>
  Options.text(name).pipe(
    Options.withSchema(ParsedText(`--${name}`, Schema.instanceOf(URL), parseLoopbackUrl, (url) => url.href))
  )

export const providerOptions = {
  claudeExecutable: orVariable(
    Options.text("claude-executable"),
    providerVariables.claudeExecutable,
    "Absolute path of the Claude Code CLI (default: $RELAYKEEP_CLAUDE_EXECUTABLE, else config.json; none: the provider is off)"
  ),
  codexExecutable: orVariable(
    Options.text("codex-executable"),
    providerVariables.codexExecutable,
    "Absolute path of the Codex CLI (default: $RELAYKEEP_CODEX_EXECUTABLE, else config.json; none: the provider is off)"
  ),
  workDir: orVariable(
    Options.text("work-dir"),
    providerVariables.workDir,
    "Absolute path of the directory the CLIs run in (default: $RELAYKEEP_WORK_DIR, else config.json)"
  ),
  allowWorkDir: repeatedOrVariable(
    "allow-work-dir",
    parseAbsolutePath,
    undefined,
    "Let a payload name its own work_dir inside this directory, after symbolic links (absolute; default: allow_work_dirs in config.json)"
  ),
  // A present flag is on; when it is left off, the variable's value (or none) stands, never a
  // default `false` that would hide config.json's setting.
  codexSkipGitCheck: Options.boolean("codex-skip-git-check").pipe(
    Options.withFallbackConfig(Config.option(providerVariables.codexSkipGitCheck)),
    Options.map((value) => (typeof value === "boolean" ? Option.some(value) : value)),
    Options.withDescription(
      "Let Codex run in a work dir that is not a git repository (default: $RELAYKEEP_CODEX_SKIP_GIT_CHECK, else config.json, else off: Codex refuses; see SECURITY.md)"
    )
  ),
  ollamaUrl: orVariable(
    url("ollama-url"),
    providerVariables.ollamaUrl,
    "Ollama on this machine, e.g. http://127.0.0.1:11434 (default: $RELAYKEEP_OLLAMA_URL, else config.json)"
  ),
  openaiUrl: orVariable(
    url("openai-url"),
    providerVariables.openaiUrl,
    "An OpenAI-compatible server on this machine, e.g. http://127.0.0.1:8080 (default: $RELAYKEEP_OPENAI_URL, else config.json)"
  ),
  stripEnv: repeatedOrVariable(
    "strip-env",
    parseNamePattern,
    providerVariables.stripEnv,
    "Remove variables from the CLIs' environment: a name or a pattern such as AWS_*, any case (default: $RELAYKEEP_STRIP_ENV, comma-separated, else config.json)"
  ),
  passEnv: repeatedOrVariable(
    "pass-env",
    parseNamePattern,
    providerVariables.passEnv,
    "Pass the CLIs only these variables: names or patterns, an allowlist instead of --strip-env (default: $RELAYKEEP_PASS_ENV, comma-separated, else config.json)"
  ),
  taskTimeout: orVariable(
    Options.text("task-timeout").pipe(Options.withSchema(DurationMillis("--task-timeout"))),
    providerVariables.taskTimeout,
    "Stop a provider after this long: 90s, 5m, 2h or seconds (default: $RELAYKEEP_TASK_TIMEOUT, else config.json, else 30m)"
  ),
  killGrace: orVariable(
    Options.text("kill-grace").pipe(Options.withSchema(DurationMillis("--kill-grace"))),
    providerVariables.killGrace,
    "Between SIGTERM and SIGKILL when stopping a provider (default: $RELAYKEEP_KILL_GRACE, else config.json, else 10s)"
  ),
  maxOutput: orVariable(
    Options.text("max-output").pipe(
      Options.withSchema(ParsedText("--max-output", Schema.Number, parseSize, (bytes) => `${bytes}`))
    ),
    providerVariables.maxOutput,
    "Stop a provider whose output passes this many bytes: K, M, G suffixes (default: $RELAYKEEP_MAX_OUTPUT, else config.json, else 8MiB)"
  )
}

export type ProviderArgs = {
  readonly [K in keyof typeof providerOptions]: (typeof providerOptions)[K] extends Options.Options<infer A>
    ? A
    : never
}

/**
 * Node's HTTP client, for the providers that call model servers. Loaded by the commands that
 * build providers (`worker`, `doctor`), so that the others start without it.
 */
export const httpClientLayer = Layer.unwrapEffect(
  Effect.map(
    Effect.promise(() => import("@effect/platform-node/NodeHttpClient")),
    (http) => http.layer
  )
)
