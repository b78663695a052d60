/**
 * Diagnostics for each configured provider, spending no model call: executables and their
 * `--version`, the work dir, and whether the local model servers answer and what they list.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Duration, Effect, Either, Option, Schema } from "effect"
import { Host } from "../services/Host.js"
import { checkCliPaths, childEnvironment } from "./cli.js"
import { runBounded } from "./process.js"
import type { ProviderSettings } from "./settings.js"
import { endpoint } from "./settings.js"
import { chatCompletionsUrl } from "./openai.js"

export interface Diagnosis {
  readonly provider: "claude" | "codex" | "ollama" | "openai"
  readonly configured: boolean
  readonly ok: boolean
  /** The executable or the URL. */
  readonly target: string | null
  readonly version: string | null
  readonly work_dir: string | null
  readonly models: ReadonlyArray<string>
  readonly problem: string | null
}

const ProbeTimeout = Duration.seconds(10)

const diagnoseCli = (
  provider: "claude" | "codex",
  executable: string | undefined,
  settings: ProviderSettings
) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const base = { provider, target: executable ?? null, work_dir: settings.workDir ?? null, models: [] }
    if (executable === undefined) {
      return { ...base, configured: false, ok: false, version: null, problem: `no --${provider}-executable` }
    }
    const paths = yield* Effect.either(checkCliPaths(fs, provider, executable, settings.workDir))
    if (Either.isLeft(paths))
      return { ...base, configured: true, ok: false, version: null, problem: paths.left.reason }
    const host = yield* Host
    const run = yield* Effect.either(
      runBounded({
        provider,
        executable: paths.right.executable,
        args: ["--version"],
        cwd: paths.right.workDir,
        env: childEnvironment(host.environment, settings),
        stdin: "",
        timeoutMillis: Duration.toMillis(ProbeTimeout),
        graceMillis: 1000,
        maxOutputBytes: 64 * 1024
      })
    )
    if (Either.isLeft(run))
      return { ...base, configured: true, ok: false, version: null, problem: run.left.message }
    const version = new TextDecoder().decode(run.right.stdout).trim().split("\n")[0] ?? ""
    return run.right.exitCode === 0
      ? { ...base, configured: true, ok: true, version, problem: null }
      : {
          ...base,
          configured: true,
          ok: false,
          version: null,
          problem: `--version exited with code ${run.right.exitCode}`
        }
  })

const OllamaTags = Schema.parseJson(
  Schema.Struct({ models: Schema.Array(Schema.Struct({ name: Schema.String })) })
)
const OpenAiModels = Schema.parseJson(
  Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String })) })
)

const diagnoseHttp = (provider: "ollama" | "openai", url: URL | undefined) =>
  Effect.gen(function* () {
    const base = { provider, target: url?.href ?? null, version: null, work_dir: null }
    if (url === undefined)
      return { ...base, configured: false, ok: false, models: [], problem: `no --${provider}-url` }
    const client = yield* HttpClient.HttpClient
    const listUrl =
      provider === "ollama"
        ? endpoint(url, "/api/tags")
        : chatCompletionsUrl(url).replace(/\/chat\/completions$/, "/models")
    const answer = yield* client.execute(HttpClientRequest.get(listUrl)).pipe(
      Effect.flatMap((response) => Effect.map(response.text, (text) => ({ status: response.status, text }))),
      Effect.scoped,
      Effect.timeoutOption(ProbeTimeout),
      Effect.either
    )
    if (Either.isLeft(answer))
      return {
        ...base,
        configured: true,
        ok: false,
        models: [],
        problem: `does not answer: ${answer.left.message}`
      }
    if (Option.isNone(answer.right))
      return { ...base, configured: true, ok: false, models: [], problem: "did not answer in time" }
    const { status, text } = answer.right.value
    if (status !== 200)
      return { ...base, configured: true, ok: false, models: [], problem: `HTTP ${status} from ${listUrl}` }
    const models =
      provider === "ollama"
        ? Either.map(Schema.decodeUnknownEither(OllamaTags)(text), (tags) => tags.models.map((m) => m.name))
        : Either.map(Schema.decodeUnknownEither(OpenAiModels)(text), (list) => list.data.map((m) => m.id))
    return Either.isRight(models)
      ? { ...base, configured: true, ok: true, models: models.right, problem: null }
      : { ...base, configured: true, ok: false, models: [], problem: "the model list does not decode" }
  })

export const diagnose = (settings: ProviderSettings) =>
  Effect.all(
    [
      diagnoseCli("claude", settings.claudeExecutable, settings),
      diagnoseCli("codex", settings.codexExecutable, settings),
      diagnoseHttp("ollama", settings.ollamaUrl),
      diagnoseHttp("openai", settings.openaiUrl)
    ],
    { concurrency: "unbounded" }
  ).pipe(Effect.map((all): ReadonlyArray<Diagnosis> => all))
