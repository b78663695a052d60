/**
 * What `relaykeep doctor` reports (the JSON schema docs/providers.md documents) and the pieces
 * every check shares: a check's verdict, a provider's row built from its checks, and an HTTP
 * probe with a bound.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Duration, Effect, Either, Option, Schema } from "effect"

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

export const ProbeTimeout = Duration.seconds(10)

export const check = (name: DoctorCheck["check"], ok: boolean, detail: string): DoctorCheck => ({
  check: name,
  ok,
  detail
})

export const finish = (
  base: Omit<Diagnosis, "ok" | "problem" | "checks" | "configured">,
  checks: ReadonlyArray<DoctorCheck>
): Diagnosis => {
  const failed = checks.find((c) => !c.ok)
  return { ...base, configured: true, ok: failed === undefined, problem: failed?.detail ?? null, checks }
}

export type Unanswered =
  { readonly _tag: "Status"; readonly status: number } | { readonly _tag: "Silent"; readonly detail: string }

export const describeUnanswered = (url: string, failure: Unanswered): string =>
  failure._tag === "Status" ? `HTTP ${failure.status} from ${url}` : failure.detail

/** GET a URL: its body on a 200, else what went wrong. */
export const fetchText = (
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

/** `GET /v1/models` of an OpenAI-compatible server: the ids it lists. */
export const OpenAiModelList = Schema.transform(
  Schema.parseJson(Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String })) })),
  Schema.Array(Schema.String),
  {
    strict: true,
    decode: (list) => list.data.map((model) => model.id),
    encode: (ids) => ({ data: ids.map((id) => ({ id })) })
  }
)

/** One `model` check for each model tasks will ask for: listed by the server, or not. */
export const modelChecks = (
  expected: ReadonlyArray<string>,
  listed: ReadonlyArray<string>,
  server: string
): ReadonlyArray<DoctorCheck> =>
  expected.map((model) =>
    listed.includes(model)
      ? check("model", true, `${model} is listed`)
      : check("model", false, `${model} is not among the models ${server} lists`)
  )
