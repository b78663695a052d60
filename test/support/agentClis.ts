/**
 * The real Claude Code and Codex CLIs, at the versions pinned in fixtures/agent-clis.json, as
 * scripts/install-agent-clis.sh installs them (into $RELAYKEEP_AGENT_CLIS or the user's cache,
 * outside the project). And what running them hermetically needs: a home of their own, an
 * environment that points them at a loopback stand-in of their model API (./modelApis.ts) and
 * keeps them from calling anything else, and a git repository to work in.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")

interface Pins {
  readonly packages: Readonly<Record<string, string>>
}
const readPins = (): Pins => {
  const parsed: unknown = JSON.parse(fs.readFileSync(path.join(repo, "fixtures", "agent-clis.json"), "utf8"))
  if (typeof parsed !== "object" || parsed === null || !("packages" in parsed))
    throw new Error("bad agent-clis.json")
  const packages: unknown = parsed.packages
  if (typeof packages !== "object" || packages === null) throw new Error("bad agent-clis.json")
  return {
    packages: Object.fromEntries(Object.entries(packages).map(([name, version]) => [name, String(version)]))
  }
}

export const pins = readPins().packages
export const claudeVersion = pins["@anthropic-ai/claude-code"] ?? "?"
export const codexVersion = pins["@openai/codex"] ?? "?"

/** The folder the install script uses for these pins (the same rule as the script's). */
const installFolder = (): string => {
  const cache =
    process.env["RELAYKEEP_AGENT_CLIS"] ??
    path.join(process.env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"), "relaykeep", "agent-clis")
  const name = Object.entries(pins)
    .map(([pkg, version]) => `${pkg.replace(/^@[a-z-]+\//, "")}-${version}`)
    .join("_")
  return path.join(cache, name)
}

export interface AgentClis {
  readonly folder: string
  /** `node_modules/.bin/claude`: the native binary the package ships. */
  readonly claude: string
  /** `node_modules/.bin/codex`: the package's launcher, which runs its native binary. */
  readonly codex: string
}

/** The installed CLIs, or why they are not there (the suite then skips with that line). */
export const findAgentClis = (): AgentClis | string => {
  const folder = installFolder()
  const claude = path.join(folder, "node_modules", ".bin", "claude")
  const codex = path.join(folder, "node_modules", ".bin", "codex")
  const missing = [claude, codex].filter((file) => !fs.existsSync(file))
  return missing.length === 0
    ? { folder, claude, codex }
    : `the pinned agent CLIs are not installed in ${folder} (run scripts/install-agent-clis.sh)`
}

/** PATH for the CLIs: node (Codex's launcher is a node script), git, coreutils. */
export const cliPath = `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`

/**
 * Claude Code's environment: its own HOME (so no user's login or settings leak in), the
 * stand-in as its API, and nothing non-essential (no telemetry, no update checks, nothing
 * that would leave the machine). `retries` is Claude's own retry budget per request.
 */
export const claudeEnvironment = (options: {
  readonly home: string
  readonly apiUrl: string
  readonly apiKey?: string | undefined
  readonly retries?: number
}): Record<string, string> => ({
  PATH: cliPath,
  HOME: options.home,
  ANTHROPIC_BASE_URL: options.apiUrl,
  ...(options.apiKey === undefined ? {} : { ANTHROPIC_API_KEY: options.apiKey }),
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  CLAUDE_CODE_MAX_RETRIES: String(options.retries ?? 1)
})

/** An MCP server for Codex's config: started by Codex for every session. */
export interface CodexMcpServer {
  readonly name: string
  readonly command: string
  readonly args: ReadonlyArray<string>
}

const tomlString = (text: string) => JSON.stringify(text)

/**
 * A CODEX_HOME whose config.toml sends Codex to the stand-in (a `model_provider` that needs no
 * login), with small retry budgets so failures surface in seconds, and optional MCP servers.
 */
export const writeCodexHome = (
  dir: string,
  options: {
    readonly apiUrl: string
    /** The variable the provider takes its API key from (`env_key`); none: no key at all. */
    readonly keyVariable?: string
    readonly mcpServers?: ReadonlyArray<CodexMcpServer>
  }
): string => {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const lines = [
    `model_provider = "stand-in"`,
    ``,
    `[model_providers.stand-in]`,
    `name = "loopback stand-in"`,
    `base_url = ${tomlString(`${options.apiUrl}/v1`)}`,
    `wire_api = "responses"`,
    ...(options.keyVariable === undefined ? [] : [`env_key = ${tomlString(options.keyVariable)}`]),
    `request_max_retries = 0`,
    `stream_max_retries = 2`,
    `stream_idle_timeout_ms = 300000`,
    ...(options.mcpServers ?? []).flatMap((server) => [
      ``,
      `[mcp_servers.${server.name}]`,
      `command = ${tomlString(server.command)}`,
      `args = [${server.args.map(tomlString).join(", ")}]`
    ])
  ]
  fs.writeFileSync(path.join(dir, "config.toml"), `${lines.join("\n")}\n`, { mode: 0o600 })
  return dir
}

export const codexEnvironment = (options: { readonly home: string; readonly codexHome: string }) => ({
  PATH: cliPath,
  HOME: options.home,
  CODEX_HOME: options.codexHome
})

/** A fresh git repository (Codex runs only inside one unless told otherwise). */
export const gitRepository = (dir: string): string => {
  fs.mkdirSync(dir, { recursive: true })
  execFileSync("git", ["init", "--quiet", dir])
  return dir
}
