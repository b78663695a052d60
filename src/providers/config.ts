/**
 * The worker's provider settings, from three sources: a command-line flag wins over its
 * environment variable, which wins over `<root>/config.json`. The flags fall back on their
 * variables as @effect/cli parses them (src/cli/providerOptions.ts, with the Configs here); the
 * dashboard, which has no flags, reads the same Configs. Every value is decoded and checked
 * before the worker starts: a bad URL or duration stops it before a task is touched.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Config, ConfigError, Effect, Either, Option, Schema } from "effect"
import { parseDuration, parseDurationWithUnit } from "../domain/duration.js"
import { InvalidInput } from "../domain/errors.js"
import { describeParseError } from "../domain/input.js"
import { envVariable } from "../platform/env.js"
import { checkRoot } from "../platform/trust.js"
import { Host } from "../services/Host.js"
import { ConfigFileName } from "../store/file/layout.js"
import { parseNamePattern } from "./environment.js"
import type { ProviderSettings } from "./settings.js"
import { defaultSettings, parseLoopbackUrl } from "./settings.js"

/**
 * What the command line and the environment set, each value already decoded and checked: a flag,
 * else its variable (`Options.withFallbackConfig` in src/cli/providerOptions.ts, or
 * `providerEnvironment` where there are no flags). `None` leaves the setting to config.json.
 */
export interface ProviderFlags {
  readonly claudeExecutable: Option.Option<string>
  readonly codexExecutable: Option.Option<string>
  readonly workDir: Option.Option<string>
  /** A flag only, with no variable. */
  readonly allowWorkDir: Option.Option<ReadonlyArray<string>>
  readonly codexSkipGitCheck: Option.Option<boolean>
  readonly ollamaUrl: Option.Option<URL>
  readonly openaiUrl: Option.Option<URL>
  readonly stripEnv: Option.Option<ReadonlyArray<string>>
  readonly passEnv: Option.Option<ReadonlyArray<string>>
  readonly taskTimeout: Option.Option<number>
  readonly killGrace: Option.Option<number>
  readonly maxOutput: Option.Option<number>
}

/** `<root>/config.json`: the same settings, in snake case. Unknown keys are errors. */
const ConfigFile = Schema.parseJson(
  Schema.Struct({
    claude_executable: Schema.optional(Schema.String),
    codex_executable: Schema.optional(Schema.String),
    work_dir: Schema.optional(Schema.String),
    allow_work_dirs: Schema.optional(Schema.Array(Schema.String)),
    codex_skip_git_check: Schema.optional(Schema.Boolean),
    ollama_url: Schema.optional(Schema.String),
    openai_url: Schema.optional(Schema.String),
    strip_env: Schema.optional(Schema.Array(Schema.String)),
    pass_env: Schema.optional(Schema.Array(Schema.String)),
    task_timeout: Schema.optional(Schema.String),
    kill_grace: Schema.optional(Schema.String),
    max_output: Schema.optional(Schema.String),
    /** A watching worker's `--retention` (not a provider setting; read by `resolveRetention`). */
    retention: Schema.optional(Schema.String)
  })
)

const Sizes: Record<string, number> = {
  "": 1,
  k: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3
}

export const parseSize = (value: string): Either.Either<number, string> => {
  const match = /^(\d+)\s*([a-z]*)$/i.exec(value.trim())
  const unit = Sizes[(match?.[2] ?? "").toLowerCase()]
  if (match?.[1] === undefined || unit === undefined) return Either.left("is not a size (try 8MiB)")
  const bytes = Number(match[1]) * unit
  return bytes > 0 ? Either.right(bytes) : Either.left("must be larger than zero")
}

/** A comma-separated list of variable names or patterns (as a variable holds them), each checked. */
export const parseNameList = (text: string) =>
  entries(
    text.split(",").filter((name) => name.trim() !== ""),
    parseNamePattern
  )

/** A directory given by absolute path. */
export const parseAbsolutePath = (path: string): Either.Either<string, string> =>
  path.startsWith("/") ? Either.right(path) : Either.left("must be an absolute path")

/** Each entry of a list checked by `parse`; the first bad one is named by its place. */
const entries = <A>(
  list: ReadonlyArray<string>,
  parse: (entry: string) => Either.Either<A, string>
): Either.Either<ReadonlyArray<A>, string> =>
  Either.all(
    list.map((entry, index) => Either.mapLeft(parse(entry), (reason) => `entry ${index + 1} ${reason}`))
  )

/** An on/off environment variable: 1/true/yes or 0/false/no, nothing else. */
export const parseSwitch = (value: string): Either.Either<boolean, string> => {
  const word = value.trim().toLowerCase()
  if (["1", "true", "yes"].includes(word)) return Either.right(true)
  if (["0", "false", "no"].includes(word)) return Either.right(false)
  return Either.left("must be 1, true or yes (on) or 0, false or no (off)")
}

/**
 * A setting's environment variable, decoded as its flag is. An empty one counts as unset; a bad
 * one is a ConfigError naming the variable, which @effect/cli reports as a usage error.
 */
const variable = <A>(name: string, parse: (text: string) => Either.Either<A, string>): Config.Config<A> =>
  envVariable(name).pipe(
    Config.mapOrFail((text) =>
      Either.mapLeft(parse(text), (reason) => ConfigError.InvalidData([name], reason))
    )
  )

/** The variable each provider flag falls back on (`--allow-work-dir` has none). */
export const providerVariables: {
  readonly [K in Exclude<keyof ProviderFlags, "allowWorkDir">]: Config.Config<
    Option.Option.Value<ProviderFlags[K]>
  >
} = {
  claudeExecutable: envVariable("RELAYKEEP_CLAUDE_EXECUTABLE"),
  codexExecutable: envVariable("RELAYKEEP_CODEX_EXECUTABLE"),
  workDir: envVariable("RELAYKEEP_WORK_DIR"),
  codexSkipGitCheck: variable("RELAYKEEP_CODEX_SKIP_GIT_CHECK", parseSwitch),
  ollamaUrl: variable("RELAYKEEP_OLLAMA_URL", parseLoopbackUrl),
  openaiUrl: variable("RELAYKEEP_OPENAI_URL", parseLoopbackUrl),
  stripEnv: variable("RELAYKEEP_STRIP_ENV", parseNameList),
  passEnv: variable("RELAYKEEP_PASS_ENV", parseNameList),
  taskTimeout: variable("RELAYKEEP_TASK_TIMEOUT", parseDuration),
  killGrace: variable("RELAYKEEP_KILL_GRACE", parseDuration),
  maxOutput: variable("RELAYKEEP_MAX_OUTPUT", parseSize)
}

/**
 * The variables alone, for a program without the flags (the dashboard's doctor): each set one
 * decoded, the rest left to config.json. A bad one is an InvalidInput naming the variable.
 */
export const providerEnvironment: Effect.Effect<ProviderFlags, InvalidInput> = Config.all({
  claudeExecutable: Config.option(providerVariables.claudeExecutable),
  codexExecutable: Config.option(providerVariables.codexExecutable),
  workDir: Config.option(providerVariables.workDir),
  codexSkipGitCheck: Config.option(providerVariables.codexSkipGitCheck),
  ollamaUrl: Config.option(providerVariables.ollamaUrl),
  openaiUrl: Config.option(providerVariables.openaiUrl),
  stripEnv: Config.option(providerVariables.stripEnv),
  passEnv: Config.option(providerVariables.passEnv),
  taskTimeout: Config.option(providerVariables.taskTimeout),
  killGrace: Config.option(providerVariables.killGrace),
  maxOutput: Config.option(providerVariables.maxOutput)
}).pipe(
  Effect.map((fromEnv): ProviderFlags => ({ ...fromEnv, allowWorkDir: Option.none() })),
  Effect.mapError((error) =>
    ConfigError.isInvalidData(error)
      ? new InvalidInput({ field: error.path.join("."), reason: error.message })
      : new InvalidInput({ field: "environment", reason: String(error) })
  )
)

const readConfigFile = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const host = yield* Host
    const file = path.join(root, ConfigFileName)
    // It names the executables the worker runs: another user's hand must not be able to reach it.
    yield* checkRoot({ fs, path, uid: host.uid }, root, { files: [file] })
    const exists = yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false))
    if (!exists) return { file, settings: {} }
    const content = yield* fs
      .readFileString(file)
      .pipe(Effect.mapError((error) => new InvalidInput({ field: file, reason: error.message })))
    const settings = yield* Schema.decodeUnknown(ConfigFile, { onExcessProperty: "error" })(content).pipe(
      Effect.mapError((error) => new InvalidInput({ field: file, reason: describeParseError(error) }))
    )
    return { file, settings }
  })

type ConfigFileSettings = typeof ConfigFile.Type

/**
 * A key of config.json decoded as its flag would be: `undefined` when it is absent, an
 * InvalidInput naming the file and the key when it is bad.
 */
const fromConfigFile = <K extends keyof ConfigFileSettings, A>(
  config: { readonly file: string; readonly settings: ConfigFileSettings },
  key: K,
  parse: (value: NonNullable<ConfigFileSettings[K]>) => Either.Either<A, string>
): Effect.Effect<A | undefined, InvalidInput> => {
  const value = config.settings[key]
  return value === undefined || value === null
    ? Effect.succeed(undefined)
    : Either.mapLeft(
        parse(value),
        (reason) => new InvalidInput({ field: config.file, reason: `${key}: ${reason}` })
      )
}

/** Resolve every setting: its flag or variable (`flags`), else `<root>/config.json`, else the default. */
export const resolveProviderSettings = (flags: ProviderFlags, root: string) =>
  Effect.gen(function* () {
    const config = yield* readConfigFile(root)
    const pick = <K extends keyof ConfigFileSettings, A>(
      given: Option.Option<A>,
      key: K,
      parse: (value: NonNullable<ConfigFileSettings[K]>) => Either.Either<A, string>
    ) => Option.match(given, { onSome: Effect.succeed, onNone: () => fromConfigFile(config, key, parse) })
    const settings: ProviderSettings = {
      claudeExecutable: yield* pick(flags.claudeExecutable, "claude_executable", Either.right),
      codexExecutable: yield* pick(flags.codexExecutable, "codex_executable", Either.right),
      workDir: yield* pick(flags.workDir, "work_dir", Either.right),
      allowedWorkDirs:
        (yield* pick(flags.allowWorkDir, "allow_work_dirs", (dirs) => entries(dirs, parseAbsolutePath))) ??
        [],
      codexSkipGitCheck:
        (yield* pick(flags.codexSkipGitCheck, "codex_skip_git_check", Either.right)) ?? false,
      ollamaUrl: yield* pick(flags.ollamaUrl, "ollama_url", parseLoopbackUrl),
      openaiUrl: yield* pick(flags.openaiUrl, "openai_url", parseLoopbackUrl),
      stripEnv: (yield* pick(flags.stripEnv, "strip_env", (names) => entries(names, parseNamePattern))) ?? [],
      passEnv: (yield* pick(flags.passEnv, "pass_env", (names) => entries(names, parseNamePattern))) ?? [],
      taskTimeoutMillis:
        (yield* pick(flags.taskTimeout, "task_timeout", parseDuration)) ?? defaultSettings.taskTimeoutMillis,
      killGraceMillis:
        (yield* pick(flags.killGrace, "kill_grace", parseDuration)) ?? defaultSettings.killGraceMillis,
      maxOutputBytes:
        (yield* pick(flags.maxOutput, "max_output", parseSize)) ?? defaultSettings.maxOutputBytes
    }
    return settings
  })

/**
 * A watching worker's retention in milliseconds: `--retention` when given, else `retention` in
 * `<root>/config.json`, else none (nothing is collected). A bad value names where it came from.
 */
export const resolveRetention = (flag: Option.Option<number>, root: string) =>
  Option.match(flag, {
    onSome: (millis) => Effect.succeed<number | undefined>(millis),
    onNone: () =>
      Effect.flatMap(readConfigFile(root), (config) =>
        fromConfigFile(config, "retention", parseDurationWithUnit)
      )
  })
