/**
 * `relaykeep doctor`: whether a task could run now on each configured provider, found out
 * without a single model call. For a CLI: the executable runs and says its version, it is
 * logged in (by its own status command, or, for Codex, a model provider of the user's that
 * needs no login), the work dir exists and, for Codex, is a git repository (unless the worker
 * skips that check), and a loopback model provider answers. For a local server: it answers
 * and lists the models tasks will ask for.
 */
import { Effect, Either, Schema } from "effect"
import { diagnoseCli } from "./doctorCli.js"
import type { Diagnosis, DoctorReport } from "./doctorReport.js"
import { check, describeUnanswered, fetchText, finish, modelChecks, OpenAiModelList } from "./doctorReport.js"
import { chatCompletionsUrl } from "./openai.js"
import type { ProviderSettings } from "./settings.js"
import { endpoint } from "./settings.js"

export { Diagnosis, DoctorCheck, DoctorReport } from "./doctorReport.js"

/** Models the local servers must list (`--ollama-model`, `--openai-model`). */
export interface Expectations {
  readonly codexModels: ReadonlyArray<string>
  readonly ollamaModels: ReadonlyArray<string>
  readonly openaiModels: ReadonlyArray<string>
}

const OllamaTags = Schema.parseJson(
  Schema.Struct({ models: Schema.Array(Schema.Struct({ name: Schema.String })) })
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
        : Schema.decodeUnknownEither(OpenAiModelList)(answer.right)
    if (Either.isLeft(models))
      return finish({ ...base, models: [] }, [check("server", false, "the model list does not decode")])
    const listed = models.right
    return finish({ ...base, models: listed }, [
      check("server", true, `lists ${listed.length} model${listed.length === 1 ? "" : "s"}`),
      ...modelChecks(expected, listed, url.href)
    ])
  })

export const diagnose = (
  settings: ProviderSettings,
  expected: Expectations = { codexModels: [], ollamaModels: [], openaiModels: [] }
) =>
  Effect.all(
    [
      diagnoseCli("claude", settings.claudeExecutable, settings, []),
      diagnoseCli("codex", settings.codexExecutable, settings, expected.codexModels),
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
