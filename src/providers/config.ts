/**
 * The worker's provider settings, from three sources: command-line flags win over environment
 * variables, which win over `<root>/config.json`. Every value is decoded and checked when the
 * worker starts; a bad URL or duration stops it before a task is touched. Shared by the CLI
 * (`worker`, `doctor`), which reads the flags with @effect/cli, and the dashboard, which has none.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Effect, Either, Option, Schema } from "effect"
import { parseDuration, parseDurationWithUnit } from "../domain/duration.js"
import { InvalidInput } from "../domain/errors.js"
import { describeParseError } from "../domain/input.js"
import { nonEmptyEnv } from "../platform/env.js"
import { checkRoot } from "../platform/trust.js"
import { Host } from "../services/Host.js"
import { ConfigFileName } from "../store/file/layout.js"
import { parseNamePattern } from "./environment.js"
import type { ProviderSettings } from "./settings.js"
import { defaultSettings, parseLoopbackUrl } from "./settings.js"

/** The provider flags of `relaykeep worker` and `doctor`, as @effect/cli parses them. */
export interface ProviderFlags {
  readonly claudeExecutable: Option.Option<string>
  readonly codexExecutable: Option.Option<string>
  readonly workDir: Option.Option<string>
  readonly allowWorkDir: ReadonlyArray<string>
  readonly codexSkipGitCheck: boolean
  readonly ollamaUrl: Option.Option<string>
  readonly openaiUrl: Option.Option<string>
  readonly stripEnv: ReadonlyArray<string>
  readonly passEnv: ReadonlyArray<string>
  readonly taskTimeout: Option.Option<string>
  readonly killGrace: Option.Option<string>
  readonly maxOutput: Option.Option<string>
}

/** No provider flag given: the settings come from the environment, then `<root>/config.json`. */
export const NoProviderFlags: ProviderFlags = {
  claudeExecutable: Option.none(),
  codexExecutable: Option.none(),
  workDir: Option.none(),
  allowWorkDir: [],
  codexSkipGitCheck: false,
  ollamaUrl: Option.none(),
  openaiUrl: Option.none(),
  stripEnv: [],
  passEnv: [],
  taskTimeout: Option.none(),
  killGrace: Option.none(),
  maxOutput: Option.none()
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

/**
 * A list of variable names or patterns: the options when some were given, else the variable
 * (comma-separated), else config.json. Each entry is checked; a bad one names the field.
 */
const namePatterns = (
  field: string,
  options: ReadonlyArray<string>,
  fromEnv: Option.Option<string>,
  fromFile: ReadonlyArray<string> | undefined
): Effect.Effect<ReadonlyArray<string>, InvalidInput> => {
  const chosen =
    options.length > 0
      ? options
      : Option.isSome(fromEnv)
        ? fromEnv.value.split(",").filter((name) => name.trim() !== "")
        : (fromFile ?? [])
  return Effect.forEach(chosen, (entry) =>
    Either.match(parseNamePattern(entry), {
      onLeft: (reason) =>
        Effect.fail(new InvalidInput({ field, reason: `entry ${chosen.indexOf(entry) + 1} ${reason}` })),
      onRight: Effect.succeed
    })
  )
}

/** Directories given by absolute path, each checked; a relative one names the field and its entry. */
const absolutePaths = (field: string, paths: ReadonlyArray<string>) =>
  Effect.forEach(paths, (path, index) =>
    path.startsWith("/")
      ? Effect.succeed(path)
      : Effect.fail(new InvalidInput({ field, reason: `entry ${index + 1} must be an absolute path` }))
  )

/** An on/off environment variable: 1/true/yes or 0/false/no, nothing else. */
export const parseSwitch = (value: string): Either.Either<boolean, string> => {
  const word = value.trim().toLowerCase()
  if (["1", "true", "yes"].includes(word)) return Either.right(true)
  if (["0", "false", "no"].includes(word)) return Either.right(false)
  return Either.left("must be 1, true or yes (on) or 0, false or no (off)")
}

const readConfigFile = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const host = yield* Host
    const file = path.join(root, ConfigFileName)
    // It names the executables the worker runs: another user's hand must not be able to reach it.
    yield* checkRoot({ fs, path, uid: host.uid }, root, { files: [file] })
    const exists = yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false))
    if (!exists) return {}
    const content = yield* fs
      .readFileString(file)
      .pipe(Effect.mapError((error) => new InvalidInput({ field: file, reason: error.message })))
    return yield* Schema.decodeUnknown(ConfigFile, { onExcessProperty: "error" })(content).pipe(
      Effect.mapError((error) => new InvalidInput({ field: file, reason: describeParseError(error) }))
    )
  })

/** Resolve every setting: option, else environment variable, else config file, else default. */
export const resolveProviderSettings = (args: ProviderFlags, root: string) =>
  Effect.gen(function* () {
    const file = yield* readConfigFile(root)
    const pick = (option: Option.Option<string>, variable: string, fromFile: string | undefined) =>
      Effect.map(nonEmptyEnv(variable), (fromEnv) =>
        Option.getOrUndefined(
          Option.orElse(option, () => Option.orElse(fromEnv, () => Option.fromNullable(fromFile)))
        )
      )
    const parsed = <A>(
      field: string,
      value: string | undefined,
      parse: (v: string) => Either.Either<A, string>
    ) =>
      value === undefined
        ? Effect.succeedNone.pipe(Effect.map(Option.getOrUndefined<A>))
        : Either.match(parse(value), {
            onLeft: (reason) => Effect.fail(new InvalidInput({ field, reason })),
            onRight: (a) => Effect.succeed(a)
          })
    const skipGitFromEnv = yield* parsed(
      "RELAYKEEP_CODEX_SKIP_GIT_CHECK",
      Option.getOrUndefined(yield* nonEmptyEnv("RELAYKEEP_CODEX_SKIP_GIT_CHECK")),
      parseSwitch
    )
    const settings: ProviderSettings = {
      claudeExecutable: yield* pick(
        args.claudeExecutable,
        "RELAYKEEP_CLAUDE_EXECUTABLE",
        file.claude_executable
      ),
      codexExecutable: yield* pick(args.codexExecutable, "RELAYKEEP_CODEX_EXECUTABLE", file.codex_executable),
      workDir: yield* pick(args.workDir, "RELAYKEEP_WORK_DIR", file.work_dir),
      allowedWorkDirs: yield* absolutePaths(
        "--allow-work-dir",
        args.allowWorkDir.length > 0 ? args.allowWorkDir : (file.allow_work_dirs ?? [])
      ),
      codexSkipGitCheck: args.codexSkipGitCheck || (skipGitFromEnv ?? file.codex_skip_git_check ?? false),
      ollamaUrl: yield* parsed(
        "--ollama-url",
        yield* pick(args.ollamaUrl, "RELAYKEEP_OLLAMA_URL", file.ollama_url),
        parseLoopbackUrl
      ),
      openaiUrl: yield* parsed(
        "--openai-url",
        yield* pick(args.openaiUrl, "RELAYKEEP_OPENAI_URL", file.openai_url),
        parseLoopbackUrl
      ),
      stripEnv: yield* namePatterns(
        "--strip-env",
        args.stripEnv,
        yield* nonEmptyEnv("RELAYKEEP_STRIP_ENV"),
        file.strip_env
      ),
      passEnv: yield* namePatterns(
        "--pass-env",
        args.passEnv,
        yield* nonEmptyEnv("RELAYKEEP_PASS_ENV"),
        file.pass_env
      ),
      taskTimeoutMillis:
        (yield* parsed(
          "--task-timeout",
          yield* pick(args.taskTimeout, "RELAYKEEP_TASK_TIMEOUT", file.task_timeout),
          parseDuration
        )) ?? defaultSettings.taskTimeoutMillis,
      killGraceMillis:
        (yield* parsed(
          "--kill-grace",
          yield* pick(args.killGrace, "RELAYKEEP_KILL_GRACE", file.kill_grace),
          parseDuration
        )) ?? defaultSettings.killGraceMillis,
      maxOutputBytes:
        (yield* parsed(
          "--max-output",
          yield* pick(args.maxOutput, "RELAYKEEP_MAX_OUTPUT", file.max_output),
          parseSize
        )) ?? defaultSettings.maxOutputBytes
    }
    return settings
  })

/**
 * A watching worker's retention in milliseconds: `--retention` when given, else `retention` in
 * `<root>/config.json`, else none (nothing is collected). A bad value names where it came from.
 */
export const resolveRetention = (flag: Option.Option<number>, root: string) =>
  Effect.gen(function* () {
    if (Option.isSome(flag)) return flag.value
    const file = yield* readConfigFile(root)
    if (file.retention === undefined) return undefined
    return yield* Either.mapLeft(
      parseDurationWithUnit(file.retention),
      (reason) => new InvalidInput({ field: `${ConfigFileName}: retention`, reason })
    )
  })
