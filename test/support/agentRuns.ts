/**
 * One run of a real agent CLI, exactly as the worker starts it (the same argv from
 * src/providers, the prompt on stdin, no shell), against a fresh stand-in of its model API
 * playing one scenario. What it printed and how it exited, for the fixtures
 * (scripts/record-cli-fixtures.ts) and for checks of the CLIs themselves.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { claudeArgs } from "../../src/providers/claude.js"
import { codexArgs } from "../../src/providers/codex.js"
import type { AgentClis } from "./agentClis.js"
import { claudeEnvironment, codexEnvironment, gitRepository, writeCodexHome } from "./agentClis.js"
import type { Scenario } from "./modelApis.js"
import { anthropicApi, responsesApi } from "./modelApis.js"

export interface CapturedRun {
  readonly args: ReadonlyArray<string>
  readonly exit_code: number | null
  readonly stdout: string
  readonly stderr: string
  /** Requests the stand-in received. */
  readonly requests: number
}

/** A named situation: which stand-in scenario, and what else differs from a plain run. */
export interface Situation {
  readonly scenario: Scenario
  /** Claude: no API key at all (not logged in). */
  readonly noCredentials?: boolean
  /** Codex: a work dir that is no git repository. */
  readonly outsideGit?: boolean
  /** Codex: the model provider names a key variable that is not set. */
  readonly missingKeyVariable?: boolean
  /** Stop the CLI after this long (SIGTERM to its group), as a task timeout would. */
  readonly stopAfterMillis?: number
}

export const prompt = "Answer with one short sentence."
export const claudeModel = "claude-sonnet-4-5"
export const codexModel = "stand-in-model"

const execute = (
  executable: string,
  args: ReadonlyArray<string>,
  options: {
    readonly cwd: string
    readonly env: Record<string, string>
    readonly stopAfterMillis?: number
    /** Written to stdin (default: the prompt). */
    readonly input?: string
  }
): Promise<Omit<CapturedRun, "requests" | "args">> =>
  new Promise((resolve, reject) => {
    const child = spawn(executable, args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: "pipe"
    })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk))
    child.stderr.on("data", (chunk: Buffer) => err.push(chunk))
    child.stdin.on("error", () => undefined)
    child.stdin.end(options.input ?? prompt)
    const stopGroup = (signal: NodeJS.Signals) => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, signal)
      } catch {
        // Already gone.
      }
    }
    const stop =
      options.stopAfterMillis === undefined
        ? undefined
        : setTimeout(() => {
            stopGroup("SIGTERM")
            setTimeout(() => stopGroup("SIGKILL"), 2000).unref()
          }, options.stopAfterMillis)
    // A guard, not a wait: every scenario ends long before.
    const guard = setTimeout(() => stopGroup("SIGKILL"), 120_000)
    child.on("error", reject)
    child.on("close", (code) => {
      clearTimeout(guard)
      if (stop !== undefined) clearTimeout(stop)
      stopGroup("SIGKILL")
      resolve({
        exit_code: code,
        stdout: Buffer.concat(out).toString(),
        stderr: Buffer.concat(err).toString()
      })
    })
  })

const scratch = () => fs.mkdtempSync(path.join(os.tmpdir(), "relaykeep-agent-"))

export const runRealClaude = async (clis: AgentClis, situation: Situation): Promise<CapturedRun> => {
  const api = await anthropicApi(situation.scenario)
  const dir = scratch()
  try {
    const home = path.join(dir, "home")
    fs.mkdirSync(home)
    const work = gitRepository(path.join(dir, "work"))
    const args = claudeArgs(claudeModel)
    const env = claudeEnvironment({
      home,
      apiUrl: api.url,
      apiKey: situation.noCredentials === true ? undefined : "sk-ant-stand-in"
    })
    const ran = await execute(clis.claude, args, {
      cwd: work,
      env,
      ...(situation.stopAfterMillis === undefined ? {} : { stopAfterMillis: situation.stopAfterMillis })
    })
    return { args, ...ran, requests: api.calls.filter((call) => call.path.startsWith("/v1/messages")).length }
  } finally {
    await api.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

export const runRealCodex = async (clis: AgentClis, situation: Situation): Promise<CapturedRun> => {
  const api = await responsesApi(situation.scenario, [codexModel])
  const dir = scratch()
  try {
    const home = path.join(dir, "home")
    fs.mkdirSync(home)
    const codexHome = writeCodexHome(path.join(dir, "codex-home"), {
      apiUrl: api.url,
      ...(situation.missingKeyVariable === true ? { keyVariable: "STAND_IN_API_KEY" } : {})
    })
    const work = path.join(dir, "work")
    if (situation.outsideGit === true) fs.mkdirSync(work)
    else gitRepository(work)
    const args = codexArgs({ skipGitCheck: false })(codexModel)
    const ran = await execute(clis.codex, args, {
      cwd: work,
      env: codexEnvironment({ home, codexHome }),
      ...(situation.stopAfterMillis === undefined ? {} : { stopAfterMillis: situation.stopAfterMillis })
    })
    return { args, ...ran, requests: api.calls.filter((call) => call.path.endsWith("/responses")).length }
  } finally {
    await api.close()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** The login states the doctor reads, each set up without a model call. */
export type LoginState = "logged_out" | "api_key"

/**
 * `claude auth status` or `codex login status` (what the doctor runs), in a fresh home: with no
 * credentials at all, or with an API key (Claude: ANTHROPIC_API_KEY; Codex: `codex login
 * --with-api-key`, which only stores it).
 */
export const runLoginStatus = async (
  clis: AgentClis,
  cli: "claude" | "codex",
  state: LoginState
): Promise<CapturedRun> => {
  const dir = scratch()
  try {
    const home = path.join(dir, "home")
    fs.mkdirSync(home)
    const work = gitRepository(path.join(dir, "work"))
    if (cli === "claude") {
      const args = ["auth", "status"]
      const env = claudeEnvironment({
        home,
        apiUrl: "http://127.0.0.1:9",
        apiKey: state === "api_key" ? "sk-ant-stand-in-0123456789" : undefined
      })
      return { args, ...(await execute(clis.claude, args, { cwd: work, env, input: "" })), requests: 0 }
    }
    const codexHome = path.join(dir, "codex-home")
    fs.mkdirSync(codexHome)
    const env = codexEnvironment({ home, codexHome })
    if (state === "api_key")
      await execute(clis.codex, ["login", "--with-api-key"], {
        cwd: work,
        env,
        input: "sk-stand-in-0123456789\n"
      })
    const args = ["login", "status"]
    return { args, ...(await execute(clis.codex, args, { cwd: work, env, input: "" })), requests: 0 }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}
