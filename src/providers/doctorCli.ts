/**
 * The doctor's checks of a coding-agent CLI: the executable and the work dir, `--version`, the
 * login through the CLI's own status command, and for Codex the git rule and a loopback model
 * provider; for Claude, a loopback ANTHROPIC_BASE_URL. Every probe runs with the environment
 * this process would give a provider, in the work dir, bounded like an attempt.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Duration, Effect, Either, Option, Schema } from "effect"
import { Host } from "../services/Host.js"
import { checkExecutable, childEnvironment } from "./cli.js"
import { checkWorkDir } from "./workDir.js"
import type { Diagnosis, DoctorCheck } from "./doctorReport.js"
import {
  check,
  describeUnanswered,
  fetchText,
  finish,
  modelChecks,
  OpenAiModelList,
  ProbeTimeout
} from "./doctorReport.js"
import type { CodexProviderConfig, LoginCheck } from "./loginStatus.js"
import {
  NoCodexConfig,
  readClaudeAuthStatus,
  readCodexLogin,
  readCodexProviderConfig
} from "./loginStatus.js"
import { runBounded } from "./process.js"
import type { ProviderSettings } from "./settings.js"
import { endpoint, parseLoopbackUrl } from "./settings.js"

const probeCli = (
  provider: string,
  executable: string,
  args: ReadonlyArray<string>,
  workDir: string,
  env: Readonly<Record<string, string>>
) =>
  runBounded({
    provider,
    executable,
    args,
    cwd: workDir,
    env,
    stdin: "",
    timeoutMillis: Duration.toMillis(ProbeTimeout),
    graceMillis: 1000,
    maxOutputBytes: 64 * 1024
  }).pipe(
    Effect.map((run) => ({
      exitCode: run.exitCode,
      stdout: new TextDecoder().decode(run.stdout),
      stderr: run.stderrEnd
    })),
    Effect.either
  )

/** The nearest directory at or above `dir` that holds `.git`, or Codex trusts. */
const gitRepositoryOf = (fs: FileSystem.FileSystem, dir: string, trusted: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    for (let at = dir; ; at = at.replace(/\/[^/]*$/, "") || "/") {
      if (trusted.includes(at)) return Option.some({ at, how: "trusted in Codex's config.toml" })
      if (yield* fs.exists(`${at}/.git`).pipe(Effect.orElseSucceed(() => false)))
        return Option.some({ at, how: "a git repository" })
      if (at === "/") return Option.none()
    }
  })

/** Codex's config.toml (in CODEX_HOME, else ~/.codex): none at all is OpenAI's own provider. */
const loadCodexConfig = (fs: FileSystem.FileSystem, env: Readonly<Record<string, string>>) => {
  const home = env["CODEX_HOME"] ?? (env["HOME"] === undefined ? undefined : `${env["HOME"]}/.codex`)
  if (home === undefined) return Effect.succeed(Either.right(NoCodexConfig))
  const file = `${home}/config.toml`
  return fs.exists(file).pipe(
    Effect.orElseSucceed(() => true),
    Effect.flatMap((exists) =>
      exists
        ? fs.readFileString(file).pipe(
            Effect.map((text) =>
              Either.mapLeft(readCodexProviderConfig(text), (reason) => `${file}: ${reason}`)
            ),
            Effect.catchAll((error) =>
              Effect.succeed(Either.left(`${file} cannot be read: ${error.message}`))
            )
          )
        : Effect.succeed(Either.right(NoCodexConfig))
    )
  )
}

export const diagnoseCli = (
  provider: "claude" | "codex",
  executable: string | undefined,
  settings: ProviderSettings,
  /** Codex: models tasks will ask for, checked against a loopback model provider's list. */
  codexModels: ReadonlyArray<string>
) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const host = yield* Host
    const base = { provider, target: executable ?? null, work_dir: settings.workDir ?? null, models: [] }
    if (executable === undefined)
      return {
        ...base,
        configured: false,
        ok: false,
        version: null,
        problem: `no --${provider}-executable`,
        checks: []
      } satisfies Diagnosis
    const exe = yield* Effect.either(checkExecutable(fs, provider, executable))
    const dir = yield* Effect.either(checkWorkDir(fs, provider, settings.workDir))
    const checks: Array<DoctorCheck> = [
      check("executable", Either.isRight(exe), Either.isRight(exe) ? "an executable file" : exe.left.reason),
      check("work_dir", Either.isRight(dir), Either.isRight(dir) ? "a directory" : dir.left.reason)
    ]
    if (Either.isLeft(exe) || Either.isLeft(dir)) return finish({ ...base, version: null }, checks)
    const env = childEnvironment(host.environment, settings)
    const probe = (args: ReadonlyArray<string>) => probeCli(provider, exe.right, args, dir.right, env)

    const ran = yield* probe(["--version"])
    const version =
      Either.isRight(ran) && ran.right.exitCode === 0 ? (ran.right.stdout.trim().split("\n")[0] ?? "") : null
    checks.push(
      check(
        "version",
        version !== null,
        version ??
          (Either.isLeft(ran) ? ran.left.message : `--version exited with code ${ran.right.exitCode}`)
      )
    )
    if (version === null) return finish({ ...base, version }, checks)

    if (provider === "claude") {
      const status = yield* probe(["auth", "status"])
      checks.push(
        Either.isLeft(status)
          ? check("login", false, `\`claude auth status\` failed: ${status.left.message}`)
          : loginCheck(readClaudeAuthStatus(status.right))
      )
      const server = yield* claudeServerCheck(env)
      if (server !== undefined) checks.push(server)
      return finish({ ...base, version }, checks)
    }

    const loaded = yield* loadCodexConfig(fs, env)
    if (Either.isLeft(loaded)) {
      checks.push(check("login", false, `Codex would not start: ${loaded.left}`))
      return finish({ ...base, version }, checks)
    }
    const config = loaded.right
    const status = yield* probe(["login", "status"])
    checks.push(
      Either.isLeft(status)
        ? check("login", false, `\`codex login status\` failed: ${status.left.message}`)
        : loginCheck(readCodexLogin(status.right, config, env))
    )
    if (settings.codexSkipGitCheck)
      checks.push(check("git_repository", true, "not required: --codex-skip-git-check"))
    else {
      const repository = yield* gitRepositoryOf(fs, dir.right, config.trustedProjects)
      checks.push(
        Option.match(repository, {
          onNone: () =>
            check(
              "git_repository",
              false,
              `the work dir ${dir.right} is not in a git repository, so Codex refuses to run there: run \`git init\` in it, or start the worker with --codex-skip-git-check`
            ),
          onSome: ({ at, how }) => check("git_repository", true, `${at} is ${how}`)
        })
      )
    }
    checks.push(...(yield* codexServerCheck(config, codexModels)))
    return finish({ ...base, version }, checks)
  })

const loginCheck = (login: LoginCheck) => check("login", login.ok, login.detail)

/**
 * Claude's API when ANTHROPIC_BASE_URL points at this machine (a gateway, a local server): does
 * it answer at all? Any HTTP status counts, since listing models needs a key we do not send.
 */
const claudeServerCheck = (env: Readonly<Record<string, string>>) =>
  Effect.gen(function* () {
    const base = env["ANTHROPIC_BASE_URL"]
    if (base === undefined) return undefined
    const url = parseLoopbackUrl(base)
    if (Either.isLeft(url)) return undefined // Anthropic's own API, or a remote gateway: not probed
    const probeUrl = endpoint(url.right, "/v1/models")
    const answer = yield* fetchText(probeUrl)
    return Either.isLeft(answer) && answer.left._tag === "Silent"
      ? check("server", false, `ANTHROPIC_BASE_URL ${url.right.href} ${answer.left.detail}`)
      : check("server", true, `ANTHROPIC_BASE_URL ${url.right.href} answers`)
  })

/** Codex's own model provider, when it is a server on this machine: does it answer? */
const codexServerCheck = (config: CodexProviderConfig, models: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const unchecked = (why: string): ReadonlyArray<DoctorCheck> =>
      models.map((model) => check("model", false, `${model} cannot be checked without a model call: ${why}`))
    if (config.baseUrl === undefined) return unchecked("Codex's model provider is not a server of your own")
    const url = parseLoopbackUrl(config.baseUrl)
    // A remote provider: nothing to ask without a model call.
    if (Either.isLeft(url)) return unchecked(`model provider ${config.name} is not on this machine`)
    const listUrl = endpoint(url.right, "/models")
    const answer = yield* fetchText(listUrl)
    if (Either.isLeft(answer))
      return [
        check("server", false, `model provider ${config.name}: ${describeUnanswered(listUrl, answer.left)}`)
      ]
    const listed = Schema.decodeUnknownEither(OpenAiModelList)(answer.right)
    return [
      check("server", true, `model provider ${config.name} at ${url.right.href} answers`),
      ...modelChecks(
        models,
        Either.getOrElse(listed, () => []),
        `model provider ${config.name}`
      )
    ]
  })
