/**
 * Whether a CLI could call its model now, from what the CLI itself says without a model call:
 * `claude auth status` (JSON on stdout, exit 1 when not logged in) and `codex login status`
 * (a line on stderr, exit 1 when not logged in), and, since Codex needs no login for a model
 * provider of the user's own, the part of its config.toml that chooses that provider. Pure, so
 * output recorded from the real CLIs (fixtures/cli/) replays through it.
 */
import { Either, Schema } from "effect"
import { parse as parseToml, TomlError } from "smol-toml"
import { describeParseError } from "../domain/input.js"
import { NotLoggedIn } from "./claude.js"
import { lineMatching } from "./verdict.js"

export interface LoginCheck {
  readonly ok: boolean
  readonly detail: string
}

const ClaudeAuthStatus = Schema.parseJson(
  Schema.Struct({
    loggedIn: Schema.Boolean,
    authMethod: Schema.optional(Schema.String),
    apiKeySource: Schema.optional(Schema.String)
  })
)

export const readClaudeAuthStatus = (run: {
  readonly exitCode: number
  readonly stdout: string
}): LoginCheck => {
  const status = Schema.decodeUnknownEither(ClaudeAuthStatus)(run.stdout.trim())
  if (Either.isLeft(status))
    return {
      ok: false,
      detail: `\`claude auth status\` gave no status (exit ${run.exitCode}): this release may not have it; log in with \`claude\` as the worker's user`
    }
  const { loggedIn, authMethod, apiKeySource } = status.right
  if (!loggedIn) return { ok: false, detail: NotLoggedIn }
  const how = [authMethod, apiKeySource === undefined ? undefined : `from ${apiKeySource}`]
    .filter((part) => part !== undefined)
    .join(" ")
  return { ok: true, detail: how === "" ? "logged in" : `logged in (${how})` }
}

/** The few settings of Codex's config.toml that decide whether it needs a login. */
export interface CodexProviderConfig {
  /** The top-level `model_provider`; undefined means OpenAI's own. */
  readonly name: string | undefined
  readonly baseUrl: string | undefined
  readonly envKey: string | undefined
  readonly requiresOpenAiAuth: boolean
  /** Directories marked `trust_level = "trusted"` under `[projects."…"]`: Codex runs there outside git. */
  readonly trustedProjects: ReadonlyArray<string>
}

const Table = <F extends Schema.Struct.Fields>(fields: F) =>
  Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Struct(fields) }))

/** The parts of Codex's config.toml that decide the login; the rest is Codex's business. */
const CodexConfig = Schema.Struct({
  model_provider: Schema.optional(Schema.String),
  profile: Schema.optional(Schema.String),
  profiles: Table({ model_provider: Schema.optional(Schema.String) }),
  model_providers: Table({
    base_url: Schema.optional(Schema.String),
    env_key: Schema.optional(Schema.String),
    requires_openai_auth: Schema.optional(Schema.Boolean)
  }),
  projects: Table({ trust_level: Schema.optional(Schema.String) })
})

/**
 * Read Codex's config.toml (a real TOML parser): `model_provider`, as the top-level `profile`
 * may override it, that provider's table, and the trusted projects. `-c` overrides are not
 * followed (the worker passes none). A file that does not parse, or holds a wrong type where
 * these keys are, is an error naming the line or the key, never quoting the file.
 */
export const readCodexProviderConfig = (toml: string): Either.Either<CodexProviderConfig, string> => {
  const parsed = Either.try({
    try: () => parseToml(toml),
    catch: (error) =>
      error instanceof TomlError
        ? `config.toml does not parse (line ${error.line}, column ${error.column})`
        : "config.toml does not parse"
  })
  return Either.flatMap(parsed, (document) =>
    Either.map(
      Either.mapLeft(
        Schema.decodeUnknownEither(CodexConfig)(document),
        (error) => `config.toml: ${describeParseError(error)}`
      ),
      (config): CodexProviderConfig => {
        const profile = config.profile === undefined ? undefined : config.profiles?.[config.profile]
        const name = profile?.model_provider ?? config.model_provider
        const provider = name === undefined ? undefined : config.model_providers?.[name]
        return {
          name,
          baseUrl: provider?.base_url,
          envKey: provider?.env_key,
          requiresOpenAiAuth: provider?.requires_openai_auth === true,
          trustedProjects: Object.entries(config.projects ?? {}).flatMap(([path, project]) =>
            project.trust_level === "trusted" ? [path] : []
          )
        }
      }
    )
  )
}

/** No config.toml at all: OpenAI's own provider. */
export const NoCodexConfig: CodexProviderConfig = {
  name: undefined,
  baseUrl: undefined,
  envKey: undefined,
  requiresOpenAiAuth: false,
  trustedProjects: []
}

/**
 * Whether Codex can call its model: logged in (`codex login status` exit 0), or a model
 * provider of the user's own that needs no login, or takes its key from a variable the
 * worker's environment has. The masked key `login status` prints is never repeated.
 */
export const readCodexLogin = (
  run: { readonly exitCode: number; readonly stderr: string },
  config: CodexProviderConfig,
  environment: Readonly<Record<string, string>>
): LoginCheck => {
  const own = config.name !== undefined && config.name !== "openai"
  // A provider's key variable is needed whatever the login says: Codex reads it for each request.
  if (own && config.envKey !== undefined && (environment[config.envKey] ?? "") === "")
    return {
      ok: false,
      detail: `model provider ${config.name} takes its key from ${config.envKey}, which the worker's environment does not have (or --strip-env removes)`
    }
  if (run.exitCode === 0) return { ok: true, detail: "logged in (`codex login status`)" }
  const notLoggedIn = lineMatching(run.stderr, /not logged in/i) !== undefined
  const said = notLoggedIn ? "not logged in" : `\`codex login status\` exited with code ${run.exitCode}`
  if (!own || config.requiresOpenAiAuth)
    return {
      ok: false,
      detail: `${said}${own ? ` and model provider ${config.name} requires an OpenAI login` : ""}: run \`codex login\` as the worker's user`
    }
  return {
    ok: true,
    detail:
      config.envKey === undefined
        ? `no login needed: model provider ${config.name} takes no key`
        : `no login needed: model provider ${config.name} takes its key from ${config.envKey}`
  }
}
