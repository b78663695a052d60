/**
 * `relaykeep doctor`: whether a task could run now on each configured provider, found out
 * without a single model call. For a CLI: the executable runs and says its version, it is
 * logged in (by its own status command, or, for Codex, a model provider of the user's that
 * needs no login), the work dir exists and, for Codex, is a git repository (unless the worker
 * skips that check), and a loopback model provider answers. For a local server: it answers
 * and lists the models tasks will ask for.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Duration, Effect, Either, Option, Schema } from "effect"
import { Host } from "../services/Host.js"
import { checkExecutable, checkWorkDir, childEnvironment } from "./cli.js"
import type { CodexProviderConfig, LoginCheck } from "./loginStatus.js"
import { readClaudeAuthStatus, readCodexLogin, readCodexProviderConfig } from "./loginStatus.js"
import { chatCompletionsUrl } from "./openai.js"
import { runBounded } from "./process.js"
import type { ProviderSettings } from "./settings.js"
import { endpoint, parseLoopbackUrl } from "./settings.js"

/** One thing the doctor checked, in the order it checked them. */
export const DoctorCheck = Schema.Struct({
  check: Schema.Literal("executable", "version", "login", "work_dir", "git_repository", "server", "model"),
  ok: Schema.Boolean,
  detail: Schema.String
})
export type DoctorCheck = typeof DoctorCheck.Type

/** One provider. `ok`: every check passed, so a task for it could run now. */
export const Diagnosis = Schema.Struct({
  provider: Schema.Literal("claude", "codex", "ollama", "openai"),
  configured: Schema.Boolean,
  ok: Schema.Boolean,
  /** The executable or the URL. */
  target: Schema.NullOr(Schema.String),
  version: Schema.NullOr(Schema.String),
  work_dir: Schema.NullOr(Schema.String),
  /** What a local server lists. */
  models: Schema.Array(Schema.String),
  /** The first failed check's detail; null when ok (or not configured: see `configured`). */
  problem: Schema.NullOr(Schema.String),
  checks: Schema.Array(DoctorCheck)
})
export type Diagnosis = typeof Diagnosis.Type

/** What `relaykeep doctor --json` prints. `ok`: every configured provider is ready. */
export const DoctorReport = Schema.Struct({
  ok: Schema.Boolean,
  work_dir: Schema.NullOr(Schema.String),
  providers: Schema.Array(Diagnosis)
})
export type DoctorReport = typeof DoctorReport.Type

/** Models the local servers must list (`--ollama-model`, `--openai-model`). */
export interface Expectations {
  readonly ollamaModels: ReadonlyArray<string>
  readonly openaiModels: ReadonlyArray<string>
}

const ProbeTimeout = Duration.seconds(10)

const check = (name: DoctorCheck["check"], ok: boolean, detail: string): DoctorCheck => ({
  check: name,
  ok,
  detail
})

const finish = (
  base: Omit<Diagnosis, "ok" | "problem" | "checks" | "configured">,
  checks: ReadonlyArray<DoctorCheck>
): Diagnosis => {
  const failed = checks.find((c) => !c.ok)
  return { ...base, configured: true, ok: failed === undefined, problem: failed?.detail ?? null, checks }
}

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

const loadCodexConfig = (fs: FileSystem.FileSystem, env: Readonly<Record<string, string>>) => {
  const home = env["CODEX_HOME"] ?? (env["HOME"] === undefined ? undefined : `${env["HOME"]}/.codex`)
  return home === undefined
    ? Effect.succeed(readCodexProviderConfig(""))
    : fs.readFileString(`${home}/config.toml`).pipe(
        Effect.orElseSucceed(() => ""),
        Effect.map(readCodexProviderConfig)
      )
}

const diagnoseCli = (
  provider: "claude" | "codex",
  executable: string | undefined,
  settings: ProviderSettings
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
      return finish({ ...base, version }, checks)
    }

    const config = yield* loadCodexConfig(fs, env)
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
    const server = yield* codexServerCheck(config)
    if (server !== undefined) checks.push(server)
    return finish({ ...base, version }, checks)
  })

const loginCheck = (login: LoginCheck) => check("login", login.ok, login.detail)

/** Codex's own model provider, when it is a server on this machine: does it answer? */
const codexServerCheck = (config: CodexProviderConfig) =>
  Effect.gen(function* () {
    if (config.baseUrl === undefined) return undefined
    const url = parseLoopbackUrl(config.baseUrl)
    if (Either.isLeft(url)) return undefined // a remote provider: nothing to ask without a model call
    const listUrl = endpoint(url.right, "/models")
    const answer = yield* fetchText(listUrl)
    return Either.isLeft(answer)
      ? check("server", false, `model provider ${config.name}: ${describeUnanswered(listUrl, answer.left)}`)
      : check("server", true, `model provider ${config.name} at ${url.right.href} answers`)
  })

type Unanswered =
  { readonly _tag: "Status"; readonly status: number } | { readonly _tag: "Silent"; readonly detail: string }

const describeUnanswered = (url: string, failure: Unanswered): string =>
  failure._tag === "Status" ? `HTTP ${failure.status} from ${url}` : failure.detail

/** GET a URL: its body on a 200, else what went wrong. */
const fetchText = (
  url: string
): Effect.Effect<Either.Either<string, Unanswered>, never, HttpClient.HttpClient> =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    const answer = yield* client.execute(HttpClientRequest.get(url)).pipe(
      Effect.flatMap((response) => Effect.map(response.text, (text) => ({ status: response.status, text }))),
      Effect.scoped,
      Effect.timeoutOption(ProbeTimeout),
      Effect.either
    )
    if (Either.isLeft(answer))
      return Either.left({ _tag: "Silent", detail: `does not answer: ${answer.left.message}` })
    if (Option.isNone(answer.right)) return Either.left({ _tag: "Silent", detail: "did not answer in time" })
    const { status, text } = answer.right.value
    return status === 200 ? Either.right(text) : Either.left({ _tag: "Status", status })
  })

const OllamaTags = Schema.parseJson(
  Schema.Struct({ models: Schema.Array(Schema.Struct({ name: Schema.String })) })
)
const OpenAiModels = Schema.parseJson(
  Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String })) })
)

const diagnoseHttp = (provider: "ollama" | "openai", url: URL | undefined, expected: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const base = { provider, target: url?.href ?? null, version: null, work_dir: null }
    if (url === undefined)
      return {
        ...base,
        configured: false,
        ok: false,
        models: [],
        problem: `no --${provider}-url`,
        checks: []
      } satisfies Diagnosis
    const listUrl =
      provider === "ollama"
        ? endpoint(url, "/api/tags")
        : chatCompletionsUrl(url).replace(/\/chat\/completions$/, "/models")
    const answer = yield* fetchText(listUrl)
    if (Either.isLeft(answer))
      return finish({ ...base, models: [] }, [
        check("server", false, describeUnanswered(listUrl, answer.left))
      ])
    const models =
      provider === "ollama"
        ? Either.map(Schema.decodeUnknownEither(OllamaTags)(answer.right), (tags) =>
            tags.models.map((m) => m.name)
          )
        : Either.map(Schema.decodeUnknownEither(OpenAiModels)(answer.right), (list) =>
            list.data.map((m) => m.id)
          )
    if (Either.isLeft(models))
      return finish({ ...base, models: [] }, [check("server", false, "the model list does not decode")])
    const listed = models.right
    return finish({ ...base, models: listed }, [
      check("server", true, `lists ${listed.length} model${listed.length === 1 ? "" : "s"}`),
      ...expected.map((model) =>
        listed.includes(model)
          ? check("model", true, `${model} is listed`)
          : check("model", false, `${model} is not among the models ${url.href} lists`)
      )
    ])
  })

export const diagnose = (
  settings: ProviderSettings,
  expected: Expectations = { ollamaModels: [], openaiModels: [] }
) =>
  Effect.all(
    [
      diagnoseCli("claude", settings.claudeExecutable, settings),
      diagnoseCli("codex", settings.codexExecutable, settings),
      diagnoseHttp("ollama", settings.ollamaUrl, expected.ollamaModels),
      diagnoseHttp("openai", settings.openaiUrl, expected.openaiModels)
    ],
    { concurrency: "unbounded" }
  ).pipe(
    Effect.map((providers): DoctorReport => ({
      ok: providers.every((d) => !d.configured || d.ok),
      work_dir: settings.workDir ?? null,
      providers
    }))
  )
