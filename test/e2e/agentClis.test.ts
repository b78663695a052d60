/**
 * The real Claude Code and Codex CLIs (the releases pinned in fixtures/agent-clis.json,
 * installed by scripts/install-agent-clis.sh, which .ci/run always runs) driven by the built
 * `relaykeep worker` against loopback stand-ins of their model APIs: success, a dropped stream
 * the CLI recovers from, overload and rate limits (retried under --max-attempts), an auth
 * failure (not retried), a configuration error (not retried), a hang past --task-timeout and the
 * cancel of a running task, each checked in the task the queue keeps. Also: every flag RelayKeep
 * passes appears in the pinned version's own --help.
 */
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import type { ChildProcess } from "node:child_process"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Receipt, TaskView } from "../../src/domain/Task.js"
import { claudeArgs } from "../../src/providers/claude.js"
import { codexArgs } from "../../src/providers/codex.js"
import type { AgentClis } from "../support/agentClis.js"
import {
  claudeVersion,
  codexVersion,
  claudeEnvironment,
  codexEnvironment,
  findAgentClis,
  gitRepository,
  writeCodexHome
} from "../support/agentClis.js"
import { jsonOutput, relaykeep, relaykeepBin } from "../support/cli.js"
import { doctorReport } from "../support/doctor.js"
import { spawnEnv } from "../support/environment.js"
import { isRunning } from "../support/fakeCli.js"
import { useTempDirs } from "../support/files.js"
import type { ModelApi, Scenario } from "../support/modelApis.js"
import { anthropicApi, answer, responsesApi } from "../support/modelApis.js"
import { waitFor } from "../support/waitFor.js"

// Like the PostgreSQL and browser suites, this one runs when asked: RELAYKEEP_AGENT_CLIS names the
// folder scripts/install-agent-clis.sh installs into (.ci/run sets it). Each test starts the real
// CLIs several times, which a contributor's every `npm test` need not pay for.
const found = process.env["RELAYKEEP_AGENT_CLIS"]
  ? findAgentClis()
  : "RELAYKEEP_AGENT_CLIS is not set (bash scripts/install-agent-clis.sh, then RELAYKEEP_AGENT_CLIS=~/.cache/relaykeep/agent-clis)"
const clis: AgentClis | undefined = typeof found === "string" ? undefined : found
if (typeof found === "string") {
  // One clear line, and the suite is skipped: a contributor without the CLIs still runs the rest.
  process.stderr.write(`real-CLI suite skipped: ${found}\n`)
}

const tempDir = useTempDirs()
const apis: Array<ModelApi> = []
const children: Array<ChildProcess> = []
afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL")
  for (const api of apis.splice(0)) await api.close()
})
afterAll(async () => {
  for (const api of apis.splice(0)) await api.close()
})

type Cli = "claude" | "codex"

interface Box {
  readonly root: string
  readonly work: string
  readonly env: Record<string, string>
  readonly api: ModelApi
  /** The worker's provider flags for this CLI. */
  readonly flags: ReadonlyArray<string>
}

const box = async (
  cli: Cli,
  scenario: Scenario,
  options: { readonly git?: boolean; readonly claudeKey?: boolean; readonly mcpServer?: string } = {}
): Promise<Box> => {
  const dir = tempDir()
  const home = path.join(dir, "home")
  fs.mkdirSync(home)
  const work = path.join(dir, "work")
  if (options.git === false) fs.mkdirSync(work)
  else gitRepository(work)
  const api =
    cli === "claude" ? await anthropicApi(scenario) : await responsesApi(scenario, ["stand-in-model"])
  apis.push(api)
  const env =
    cli === "claude"
      ? claudeEnvironment({
          home,
          apiUrl: api.url,
          apiKey: options.claudeKey === false ? undefined : "sk-ant-stand-in"
        })
      : codexEnvironment({
          home,
          codexHome: writeCodexHome(path.join(dir, "codex-home"), {
            apiUrl: api.url,
            ...(options.mcpServer === undefined
              ? {}
              : { mcpServers: [{ name: "stubborn", command: process.execPath, args: [options.mcpServer] }] })
          })
        })
  const executable = cli === "claude" ? clis?.claude : clis?.codex
  return {
    root: path.join(dir, "root"),
    work,
    env,
    api,
    flags: [`--${cli}-executable`, executable ?? "", "--work-dir", work, "--kill-grace", "2s"]
  }
}

const payloadFor = (cli: Cli) =>
  cli === "claude"
    ? { provider: "claude", model: "claude-sonnet-4-5", prompt: "Say hello." }
    : { provider: "codex", model: "stand-in-model", prompt: "Say hello." }

const submit = async (b: Box, cli: Cli, id = "task-1"): Promise<Receipt> =>
  jsonOutput(
    Receipt,
    await relaykeep(["submit", "--root", b.root, "--id", id, "--payload", JSON.stringify(payloadFor(cli))])
  )

const read = async (b: Box, receipt: Receipt): Promise<TaskView> =>
  jsonOutput(
    TaskView,
    await relaykeep(["read", "--root", b.root, "--task-id", receipt.task_id, "--sha", receipt.payload_sha256])
  )

/** One worker pass, in the CLI's environment (which the worker hands its children). */
const pass = async (b: Box, extra: ReadonlyArray<string> = []) => {
  const result = await relaykeep(["worker", "--root", b.root, ...b.flags, ...extra], { env: b.env })
  assert.strictEqual(result.code, 0, `worker pass: ${result.stderr}`)
  return result
}

const live = clis === undefined ? describe.skip : describe

// CI installs the CLIs before the tests (.ci/run): there, their absence is a failure, not a skip.
if (clis === undefined && process.env["RELAYKEEP_REQUIRE_AGENT_CLIS"] === "1") {
  describe("the real agent CLIs", () => {
    it("are installed, as .ci/run promises", () => assert.fail(String(found)))
  })
}

live("the real agent CLIs under the worker", { timeout: 180_000 }, () => {
  for (const cli of ["claude", "codex"] as const) {
    it(`${cli}: a streamed answer completes the task, with a receipt`, async () => {
      const b = await box(cli, "success")
      const receipt = await submit(b, cli)
      await pass(b)
      const view = await read(b, receipt)
      assert.strictEqual(view.state, "complete", JSON.stringify(view.error))
      assert.deepInclude(view.result, { provider: cli, text: answer })
      const attempt = view.attempts[0]
      assert.strictEqual(attempt?.receipt?.exit_code, 0)
      assert.isAbove(attempt?.receipt?.output_bytes ?? 0, 0)
      assert.match(attempt?.receipt?.output_sha256 ?? "", /^[0-9a-f]{64}$/)
      assert.strictEqual(b.api.calls.length > 0, true)
    })

    it(`${cli}: a stream dropped midway is recovered by the CLI, and the task completes`, async () => {
      const b = await box(cli, "drop_once")
      const receipt = await submit(b, cli)
      await pass(b)
      const view = await read(b, receipt)
      assert.strictEqual(view.state, "complete", JSON.stringify(view.error))
      assert.isAtLeast(b.api.calls.length, 2, "the CLI asked again")
      if (cli === "codex") {
        const events = view.attempts[0]?.receipt?.events ?? []
        assert.isTrue(
          events.some((event) => event.message.startsWith("Reconnecting...")),
          "Codex's reconnect notice is kept as an event"
        )
      }
    })

    for (const scenario of ["overloaded", "rate_limited"] as const) {
      it(`${cli}: ${scenario} is retried under --max-attempts, then fails`, async () => {
        const b = await box(cli, scenario)
        const receipt = await submit(b, cli)
        const retrying = ["--max-attempts", "2", "--retry-backoff", "1s", "--retry-backoff-max", "1s"]
        await pass(b, retrying)
        const first = await read(b, receipt)
        assert.strictEqual(first.state, "queued", JSON.stringify(first))
        const error = first.attempts[0]?.error
        assert.strictEqual(error?.retryable, true, JSON.stringify(error))
        const expected = {
          claude: {
            overloaded: /^claude: the API failed \(529 overloaded_error/,
            rate_limited: /^claude: the API failed \(429 rate_limit_error/
          },
          codex: {
            overloaded: /^codex: the model API failed \(We’re currently experiencing high demand/,
            rate_limited: /^codex: the model API failed \(exceeded retry limit, last status: 429/
          }
        }[cli][scenario]
        assert.match(error?.message ?? "", expected)
        assert.notInclude(error?.message ?? "", "(success)")
        // Past the backoff, the second and last attempt meets the same API and fails the task.
        await new Promise((resolve) => setTimeout(resolve, 2500))
        await pass(b, retrying)
        const last = await read(b, receipt)
        assert.strictEqual(last.state, "failed")
        assert.strictEqual(last.attempts.length, 2)
      })
    }
  }

  it("claude without credentials fails at once, not retried, saying how to log in", async () => {
    const b = await box("claude", "success", { claudeKey: false })
    const receipt = await submit(b, "claude")
    await pass(b, ["--max-attempts", "3"])
    const view = await read(b, receipt)
    assert.strictEqual(view.state, "failed")
    assert.strictEqual(view.attempts.length, 1)
    assert.strictEqual(
      view.error?.message,
      "claude: not logged in: run `claude` and log in as the worker's user"
    )
    assert.isFalse(view.error?.retryable)
    assert.strictEqual(b.api.calls.length, 0)
  })

  it("claude with a refused key fails, not retried, with the API's status", async () => {
    const b = await box("claude", "unauthorized")
    const receipt = await submit(b, "claude")
    await pass(b, ["--max-attempts", "3"])
    const view = await read(b, receipt)
    assert.strictEqual(view.state, "failed")
    assert.match(
      view.error?.message ?? "",
      /^claude: the API refused its credentials \(401 authentication_error/
    )
    assert.isFalse(view.error?.retryable)
  })

  it("codex with a refused key fails, not retried, pointing at codex login", async () => {
    const b = await box("codex", "unauthorized")
    const receipt = await submit(b, "codex")
    await pass(b, ["--max-attempts", "3"])
    const view = await read(b, receipt)
    assert.strictEqual(view.state, "failed")
    assert.strictEqual(view.attempts.length, 1)
    assert.match(view.error?.message ?? "", /^codex: could not authenticate .*`codex login`/)
  })

  it("codex outside a git repository fails at once with the fix; --codex-skip-git-check runs it", async () => {
    const b = await box("codex", "success", { git: false })
    const receipt = await submit(b, "codex")
    await pass(b, ["--max-attempts", "3"])
    const refused = await read(b, receipt)
    assert.strictEqual(refused.state, "failed")
    assert.strictEqual(refused.attempts.length, 1, "a configuration error is not retried")
    assert.match(
      refused.error?.message ?? "",
      /^codex: refuses to run outside a git repository.*--codex-skip-git-check/
    )
    assert.strictEqual(b.api.calls.length, 0)

    const second = await submit(b, "codex", "task-2")
    await pass(b, ["--codex-skip-git-check"])
    assert.strictEqual((await read(b, second)).state, "complete")
  })

  for (const cli of ["claude", "codex"] as const) {
    it(`${cli}: a hang past --task-timeout is stopped; the receipt keeps the output so far`, async () => {
      const b = await box(cli, "hang")
      const receipt = await submit(b, cli)
      await pass(b, ["--task-timeout", "4s"])
      const view = await read(b, receipt)
      assert.strictEqual(view.state, "failed")
      assert.strictEqual(view.error?.tag, "ProviderTimeout")
      const stopped = view.attempts[0]?.receipt
      assert.isNull(stopped?.exit_code)
      assert.match(stopped?.output_sha256 ?? "", /^[0-9a-f]{64}$/)
      if (cli === "codex") assert.isAbove(stopped?.output_bytes ?? 0, 0, "Codex had printed its first events")
      else assert.isAtLeast(stopped?.output_bytes ?? -1, 0)
    })
  }

  for (const cli of ["claude", "codex"] as const) {
    it(`${cli}: cancelling a running task stops it and all it started; the attempt keeps its receipt`, async () => {
      const dir = tempDir()
      const pids = path.join(dir, "mcp-pids")
      const server = path.join(dir, "stubborn-mcp.mjs")
      fs.writeFileSync(server, stubbornMcpServer(pids))
      const b = await box(cli, "hang", cli === "codex" ? { mcpServer: server } : {})
      const receipt = await submit(b, cli)
      const worker = spawn(
        process.execPath,
        [relaykeepBin, "worker", "--watch", "--root", b.root, ...b.flags, "--poll", "1s"],
        { env: spawnEnv(b.env), stdio: ["ignore", "pipe", "pipe"] }
      )
      children.push(worker)
      await waitFor("the stand-in to be asked", () => (b.api.calls.length > 0 ? true : undefined), 60_000)
      if (cli === "codex")
        await waitFor("Codex to start its MCP server", () => (fs.existsSync(pids) ? true : undefined), 60_000)
      const cancelled = await relaykeep([
        "cancel",
        "--root",
        b.root,
        "--task-id",
        receipt.task_id,
        "--sha",
        receipt.payload_sha256
      ])
      assert.strictEqual(cancelled.code, 0, cancelled.stderr)
      const view = await waitFor(
        "the task to be cancelled",
        async () => {
          const now = await read(b, receipt)
          return now.state === "cancelled" ? now : undefined
        },
        60_000
      )
      const stopped = view.attempts[0]?.receipt
      assert.isDefined(stopped, "a cancelled attempt keeps a receipt")
      assert.isNull(stopped?.exit_code)
      assert.match(stopped?.output_sha256 ?? "", /^[0-9a-f]{64}$/)
      if (cli === "codex") {
        assert.isAbove(stopped?.output_bytes ?? 0, 0, "Codex had printed its first events")
        const started = fs
          .readFileSync(pids, "utf8")
          .split("\n")
          .filter((line) => line !== "")
          .map(Number)
        assert.isAbove(started.length, 0, "Codex started the MCP server")
        for (const pid of started)
          await waitFor(`MCP server ${pid} to be gone`, () => (isRunning(pid) ? undefined : true), 20_000)
      }
      worker.kill("SIGTERM")
    })
  }

  it("codex: an MCP server that ignores SIGTERM does not outlive a timed-out attempt", async () => {
    const dir = tempDir()
    const pids = path.join(dir, "mcp-pids")
    const server = path.join(dir, "stubborn-mcp.mjs")
    fs.writeFileSync(server, stubbornMcpServer(pids))
    const b = await box("codex", "hang", { mcpServer: server })
    const receipt = await submit(b, "codex")
    await pass(b, ["--task-timeout", "6s"])
    assert.strictEqual((await read(b, receipt)).error?.tag, "ProviderTimeout")
    const started = fs.existsSync(pids)
      ? fs
          .readFileSync(pids, "utf8")
          .split("\n")
          .filter((l) => l !== "")
          .map(Number)
      : []
    assert.isAbove(started.length, 0, "Codex started the MCP server")
    for (const pid of started) {
      await waitFor(`MCP server ${pid} to be gone`, () => (isRunning(pid) ? undefined : true), 20_000)
    }
  })
})

/**
 * An MCP server (newline-delimited JSON-RPC on stdio) that answers initialize and tools/list,
 * writes its pid to `pids`, ignores SIGTERM and never exits by itself within a test (it ends
 * after 90 s, so even a failed test leaves nothing behind for long).
 */
const stubbornMcpServer = (pids: string) => `
import { appendFileSync } from "node:fs"
appendFileSync(${JSON.stringify(pids)}, process.pid + "\\n")
process.on("SIGTERM", () => {})
setTimeout(() => process.exit(0), 90_000)
let buffer = ""
process.stdin.on("data", (chunk) => {
  buffer += chunk
  for (let at = buffer.indexOf("\\n"); at >= 0; at = buffer.indexOf("\\n")) {
    const line = buffer.slice(0, at)
    buffer = buffer.slice(at + 1)
    if (line.trim() === "") continue
    const message = JSON.parse(line)
    if (message.id === undefined) continue
    const result =
      message.method === "initialize"
        ? { protocolVersion: message.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "stubborn", version: "1" } }
        : message.method === "tools/list" ? { tools: [] } : {}
    process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result }) + "\\n")
  }
})
process.stdin.on("end", () => {})
`

live("relaykeep doctor with the real CLIs", { timeout: 180_000 }, () => {
  const doctor = async (b: Box, extra: ReadonlyArray<string> = []) =>
    doctorReport(
      await relaykeep(["doctor", "--json", "--root", b.root, ...b.flags, ...extra], { env: b.env })
    )

  it("claude with an API key is ready: its version and login, no model call", async () => {
    const b = await box("claude", "success")
    const report = await doctor(b)
    const claude = report.providers[0]
    assert.isTrue(report.ok, JSON.stringify(claude))
    assert.strictEqual(claude?.version, `${claudeVersion} (Claude Code)`)
    assert.deepInclude(claude?.checks ?? [], {
      check: "login",
      ok: true,
      detail: "logged in (api_key from ANTHROPIC_API_KEY)"
    })
    assert.deepInclude(claude?.checks ?? [], {
      check: "server",
      ok: true,
      detail: `ANTHROPIC_BASE_URL ${b.api.url}/ answers`
    })
    assert.deepStrictEqual(
      b.api.calls.map((call) => `${call.method} ${call.path}`),
      ["GET /v1/models"],
      "one look at the API, no model call"
    )
  })

  it("claude without credentials is not ready, and doctor exits 1", async () => {
    const b = await box("claude", "success", { claudeKey: false })
    const report = await doctor(b)
    assert.isFalse(report.ok)
    assert.strictEqual(
      report.providers[0]?.problem,
      "not logged in: run `claude` and log in as the worker's user"
    )
  })

  it("codex with a loopback model provider of its own: no login needed, the server answers", async () => {
    const b = await box("codex", "success")
    const report = await doctor(b, ["--codex-model", "stand-in-model"])
    const codex = report.providers[1]
    assert.isTrue(report.ok, JSON.stringify(codex))
    assert.strictEqual(codex?.version, `codex-cli ${codexVersion}`)
    assert.deepStrictEqual(
      codex?.checks.map((c) => [c.check, c.ok]),
      [
        ["executable", true],
        ["work_dir", true],
        ["version", true],
        ["login", true],
        ["git_repository", true],
        ["server", true],
        ["model", true]
      ]
    )
    assert.deepStrictEqual(
      b.api.calls.map((call) => `${call.method} ${call.path}`),
      ["GET /v1/models"],
      "the model list only, no model call"
    )
  })

  it("codex outside a git repository is not ready unless the worker skips the check", async () => {
    const b = await box("codex", "success", { git: false })
    assert.match(
      (await doctor(b)).providers[1]?.problem ?? "",
      /is not in a git repository, so Codex refuses to run there/
    )
    assert.isTrue((await doctor(b, ["--codex-skip-git-check"])).ok)
  })
})

/** A line of --help that declares `flag` itself (`-p, --print`, `--json`), not one merely naming it. */
const optionLine = (flag: string) =>
  new RegExp(`^\\s*(?:-\\w,\\s+)?(?:--[\\w-]+,\\s+)?${flag.replace(/[-]/g, "\\-")}(?:[\\s,<=]|$)`, "m")

live("the flags RelayKeep passes, against each pinned version's --help", () => {
  const help = (executable: string, args: ReadonlyArray<string>, env: Record<string, string>) =>
    execFileSync(executable, [...args], { env, encoding: "utf8", timeout: 60_000 })
  const env = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: tempDir() }

  it("claude takes -p, --output-format json and --model, and has `auth status`", () => {
    const text = help(clis?.claude ?? "", ["--help"], env)
    for (const flag of claudeArgs("m").filter((arg) => arg.startsWith("-")))
      assert.match(text, optionLine(flag))
    assert.match(text, /--output-format <format>[\s\S]*"json"/)
    assert.include(help(clis?.claude ?? "", ["auth", "status", "--help"], env), "--json")
  })

  it("codex exec takes --json, --model, --skip-git-repo-check and - for stdin, and has `login status`", () => {
    const text = help(clis?.codex ?? "", ["exec", "--help"], env)
    for (const flag of codexArgs({ skipGitCheck: true })("m").filter((arg) => arg.startsWith("--")))
      assert.match(text, optionLine(flag))
    assert.match(text, /if `-` is used\),\s+instructions are read from stdin/)
    assert.include(help(clis?.codex ?? "", ["login", "--help"], env), "status")
  })
})

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * Mark `folder` trusted in Claude Code's state file, as answering its folder-trust prompt does:
 * the one interactive step of approving a project's MCP server, which a test cannot click.
 */
const trustFolder = (stateFile: string, folder: string) => {
  const state: unknown = fs.existsSync(stateFile) ? JSON.parse(fs.readFileSync(stateFile, "utf8")) : {}
  const root = isObject(state) ? state : {}
  const projects = isObject(root["projects"]) ? root["projects"] : {}
  const entry = isObject(projects[folder]) ? projects[folder] : {}
  fs.writeFileSync(
    stateFile,
    JSON.stringify({
      ...root,
      projects: { ...projects, [folder]: { ...entry, hasTrustDialogAccepted: true } }
    })
  )
}

/** The README's client setup, run with the real CLIs exactly as it is written there. */
live("the README's MCP setup, with the real Claude Code and Codex", { timeout: 180_000 }, () => {
  const repo = path.resolve(import.meta.dirname, "..", "..")
  const readme = fs.readFileSync(path.join(repo, "README.md"), "utf8")
  const blocks = (language: string, containing: string) =>
    [...readme.matchAll(new RegExp("```" + language + "\\n([\\s\\S]*?)```", "g"))]
      .map((match) => match[1] ?? "")
      .filter((text) => text.includes(containing))

  const setup = () => {
    const dir = tempDir()
    const home = path.join(dir, "home")
    const data = path.join(dir, "data")
    fs.mkdirSync(home)
    const project = gitRepository(path.join(dir, "project"))
    const fill = (text: string) =>
      text
        .replaceAll("/absolute/path/to/relaykeep-data", data)
        .replaceAll("/absolute/path/to/relaykeep", repo)
    const env = claudeEnvironment({ home, apiUrl: "http://127.0.0.1:9", apiKey: "sk-ant-stand-in" })
    /** Run a README command line (no quotes in it) with the real claude, in the project. */
    const claude = (line: string) => {
      const [name, ...args] = fill(line).trim().split(/\s+/)
      assert.strictEqual(name, "claude")
      return execFileSync(clis?.claude ?? "", args, { cwd: project, env, encoding: "utf8", timeout: 120_000 })
    }
    return { home, project, fill, claude }
  }

  it("`claude mcp add` as the README shows it: `claude mcp list` reports the server connected", () => {
    const { claude } = setup()
    const [local] = blocks("bash", "claude mcp add relaykeep-tasks")
    assert.isDefined(local)
    claude(local ?? "")
    assert.match(
      claude("claude mcp list"),
      /^relaykeep-tasks: node \S+relaykeep-tasks\.js --root \S+ - ✔ Connected$/m
    )
  })

  it("project scope: pending until approved, connected once approved as the README says", () => {
    const { home, project, claude } = setup()
    const [scoped] = blocks("bash", "claude mcp add --scope project")
    assert.isDefined(scoped)
    claude(scoped ?? "")
    assert.isTrue(fs.existsSync(path.join(project, ".mcp.json")))
    assert.match(claude("claude mcp list"), /^relaykeep-tasks: .* - ⏸ Pending approval/m)

    const [approval] = blocks("json", "enabledMcpjsonServers")
    fs.mkdirSync(path.join(project, ".claude"))
    fs.writeFileSync(path.join(project, ".claude", "settings.local.json"), approval ?? "")
    trustFolder(path.join(home, ".claude.json"), project)
    assert.match(claude("claude mcp list"), /^relaykeep-tasks: .* - ✔ Connected$/m)
  })

  it("the README's Codex TOML: `codex mcp list` shows the server, enabled, with its tool timeout", () => {
    const { home, fill } = setup()
    const [toml] = blocks("toml", "mcp_servers.relaykeep-tasks")
    const codexHome = path.join(home, "codex-home")
    fs.mkdirSync(codexHome)
    fs.writeFileSync(path.join(codexHome, "config.toml"), fill(toml ?? ""))
    const listed: unknown = JSON.parse(
      execFileSync(clis?.codex ?? "", ["mcp", "list", "--json"], {
        env: codexEnvironment({ home, codexHome }),
        encoding: "utf8",
        timeout: 60_000
      })
    )
    assert.isTrue(Array.isArray(listed))
    const server = Array.isArray(listed)
      ? listed.find((entry) => Reflect.get(entry, "name") === "relaykeep-tasks")
      : undefined
    assert.isDefined(server)
    assert.strictEqual(Reflect.get(server, "enabled"), true)
    assert.strictEqual(Reflect.get(server, "tool_timeout_sec"), 90)
  })
})
