/**
 * Whether a CLI could call its model now, from what the CLI itself says without a model call:
 * `claude auth status` (JSON on stdout, exit 1 when not logged in) and `codex login status`
 * (a line on stderr, exit 1 when not logged in), and, since Codex needs no login for a model
 * provider of the user's own, the part of its config.toml that chooses that provider. Pure, so
 * output recorded from the real CLIs (fixtures/cli/) replays through it.
 */
import { Either, Schema } from "effect"
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

const unquote = (value: string): string | boolean | undefined => {
  const text = value.replace(/\s+#.*$/, "").trim()
  if (text === "true") return true
  if (text === "false") return false
  const quoted = /^"((?:[^"\\]|\\.)*)"$|^'([^']*)'$/.exec(text)
  if (quoted === null) return undefined
  return quoted[2] ?? (quoted[1] ?? "").replace(/\\(.)/g, "$1")
}

/**
 * Read `model_provider` and its `[model_providers.NAME]` table from config.toml text. Only
 * what decides the login: plain `key = "string"` and booleans, top level and that one table.
 * Profiles and `-c` overrides are not followed (RelayKeep passes none).
 */
export const readCodexProviderConfig = (toml: string): CodexProviderConfig => {
  const tables = new Map<string, Map<string, string | boolean>>([["", new Map()]])
  let table = ""
  for (const raw of toml.split("\n")) {
    const line = raw.trim()
    if (line === "" || line.startsWith("#")) continue
    const header = /^\[\s*([^\]]+?)\s*\]$/.exec(line)
    if (header?.[1] !== undefined) {
      table = header[1].replace(/"([^"]*)"/g, "$1")
      if (!tables.has(table)) tables.set(table, new Map())
      continue
    }
    const pair = /^([A-Za-z0-9_.-]+)\s*=\s*(.+)$/.exec(line)
    if (pair?.[1] === undefined || pair[2] === undefined) continue
    const value = unquote(pair[2])
    if (value !== undefined) tables.get(table)?.set(pair[1], value)
  }
  const top = tables.get("") ?? new Map()
  const chosen = top.get("model_provider")
  const name = typeof chosen === "string" ? chosen : undefined
  const provider = name === undefined ? new Map() : (tables.get(`model_providers.${name}`) ?? new Map())
  const text = (key: string) => {
    const value = provider.get(key)
    return typeof value === "string" ? value : undefined
  }
  return {
    name,
    baseUrl: text("base_url"),
    envKey: text("env_key"),
    requiresOpenAiAuth: provider.get("requires_openai_auth") === true,
    trustedProjects: [...tables.entries()].flatMap(([name, keys]) =>
      name.startsWith("projects.") && keys.get("trust_level") === "trusted"
        ? [name.slice("projects.".length)]
        : []
    )
  }
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
  if (run.exitCode === 0) return { ok: true, detail: "logged in (`codex login status`)" }
  const notLoggedIn = lineMatching(run.stderr, /not logged in/i) !== undefined
  const said = notLoggedIn ? "not logged in" : `\`codex login status\` exited with code ${run.exitCode}`
  const own = config.name !== undefined && config.name !== "openai"
  if (!own || config.requiresOpenAiAuth)
    return {
      ok: false,
      detail: `${said}${own ? ` and model provider ${config.name} requires an OpenAI login` : ""}: run \`codex login\` as the worker's user`
    }
  if (config.envKey !== undefined && (environment[config.envKey] ?? "") === "")
    return {
      ok: false,
      detail: `model provider ${config.name} takes its key from ${config.envKey}, which the worker's environment does not have (or --strip-env removes)`
    }
  return {
    ok: true,
    detail:
      config.envKey === undefined
        ? `no login needed: model provider ${config.name} takes no key`
        : `no login needed: model provider ${config.name} takes its key from ${config.envKey}`
  }
}
