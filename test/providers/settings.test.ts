/**
 * Where the worker's provider settings come from: an option beats an environment variable,
 * which beats `<root>/config.json`, which beats the default. Bad values stop the worker.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { ProviderFlags } from "../../src/providers/config.js"
import { NoProviderFlags, resolveProviderSettings } from "../../src/providers/config.js"
import type { ProviderSettings } from "../../src/providers/settings.js"
import { Host } from "../../src/services/Host.js"
import { failureOf, sandbox } from "../support/fakeCli.js"

const none: ProviderFlags = NoProviderFlags

/** Resolve with these options, this environment, and `config` written to `<root>/config.json`. */
const resolve = (
  root: string,
  options: Partial<ProviderFlags>,
  env: Readonly<Record<string, string>>,
  config?: string
) => {
  if (config !== undefined) fs.writeFileSync(path.join(root, "config.json"), config)
  return resolveProviderSettings({ ...none, ...options }, root).pipe(
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
    Effect.provide(Layer.merge(nodeContextLayer, Host.layerTest({}))),
    Effect.either
  )
}

/** The settings with URLs as text, to compare. */
const plain = (settings: ProviderSettings) => ({
  ...settings,
  ollamaUrl: settings.ollamaUrl?.href,
  openaiUrl: settings.openaiUrl?.href
})

const fromFile = JSON.stringify({
  claude_executable: "/file/claude",
  codex_executable: "/file/codex",
  work_dir: "/file/work",
  codex_skip_git_check: true,
  ollama_url: "http://127.0.0.1:1111",
  openai_url: "http://localhost:2222/v1",
  strip_env: ["FILE_SECRET"],
  pass_env: ["HOME", "LC_*"],
  task_timeout: "90s",
  kill_grace: "2s",
  max_output: "1M",
  allow_work_dirs: ["/file/projects"]
})
const fileSettings = {
  claudeExecutable: "/file/claude",
  codexExecutable: "/file/codex",
  workDir: "/file/work",
  allowedWorkDirs: ["/file/projects"],
  codexSkipGitCheck: true,
  ollamaUrl: "http://127.0.0.1:1111/",
  openaiUrl: "http://localhost:2222/v1",
  stripEnv: ["FILE_SECRET"],
  passEnv: ["HOME", "LC_*"],
  taskTimeoutMillis: 90_000,
  killGraceMillis: 2_000,
  maxOutputBytes: 1024 * 1024
}
const fromEnv = {
  RELAYKEEP_CLAUDE_EXECUTABLE: "/env/claude",
  RELAYKEEP_CODEX_EXECUTABLE: "/env/codex",
  RELAYKEEP_WORK_DIR: "/env/work",
  RELAYKEEP_CODEX_SKIP_GIT_CHECK: "no",
  RELAYKEEP_OLLAMA_URL: "http://[::1]:3333",
  RELAYKEEP_OPENAI_URL: "http://127.0.0.1:4444",
  RELAYKEEP_STRIP_ENV: "ENV_A, ENV_B",
  RELAYKEEP_PASS_ENV: "PATH,AWS_*",
  RELAYKEEP_TASK_TIMEOUT: "5m",
  RELAYKEEP_KILL_GRACE: "3",
  RELAYKEEP_MAX_OUTPUT: "2MiB"
}
const envSettings = {
  claudeExecutable: "/env/claude",
  codexExecutable: "/env/codex",
  workDir: "/env/work",
  // No variable names it: still the file's.
  allowedWorkDirs: ["/file/projects"],
  codexSkipGitCheck: false,
  ollamaUrl: "http://[::1]:3333/",
  openaiUrl: "http://127.0.0.1:4444/",
  stripEnv: ["ENV_A", "ENV_B"],
  passEnv: ["PATH", "AWS_*"],
  taskTimeoutMillis: 300_000,
  killGraceMillis: 3_000,
  maxOutputBytes: 2 * 1024 * 1024
}

describe("provider settings", { timeout: 180_000 }, () => {
  it.scopedLive("without options, variables or config.json: the defaults", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const resolved = yield* resolve(box.dir, {}, {})
      assert.deepStrictEqual(Option.getOrUndefined(Option.map(Option.getRight(resolved), plain)), {
        claudeExecutable: undefined,
        codexExecutable: undefined,
        workDir: undefined,
        allowedWorkDirs: [],
        codexSkipGitCheck: false,
        ollamaUrl: undefined,
        openaiUrl: undefined,
        stripEnv: [],
        passEnv: [],
        taskTimeoutMillis: 30 * 60_000,
        killGraceMillis: 10_000,
        maxOutputBytes: 8 * 1024 * 1024
      })
    })
  )

  it.scopedLive(
    "a config.json others can write is refused before it is read, with the chmod that fixes it",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const file = path.join(box.dir, "config.json")
        fs.writeFileSync(file, JSON.stringify({ claude_executable: "/somewhere/else" }))
        fs.chmodSync(file, 0o666)
        const failure = failureOf(yield* resolve(box.dir, {}, {}))
        assert.strictEqual(failure._tag, "StorageError")
        assert.include(failure.message, `chmod 600 ${file}`)
        assert.strictEqual(fs.statSync(file).mode & 0o777, 0o666)
      })
  )

  it.scopedLive("config.json alone sets everything; variables beat it; options beat both", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const settingsOf = (resolved: Effect.Effect.Success<ReturnType<typeof resolve>>) =>
        Option.getOrUndefined(Option.map(Option.getRight(resolved), plain))
      assert.deepStrictEqual(settingsOf(yield* resolve(box.dir, {}, {}, fromFile)), fileSettings)
      assert.deepStrictEqual(settingsOf(yield* resolve(box.dir, {}, fromEnv)), envSettings)
      const options: Partial<ProviderFlags> = {
        claudeExecutable: Option.some("/option/claude"),
        workDir: Option.some("/option/work"),
        allowWorkDir: ["/option/a", "/option/b"],
        codexSkipGitCheck: true,
        ollamaUrl: Option.some("http://localhost:5555"),
        stripEnv: ["OPTION_SECRET"],
        taskTimeout: Option.some("2h"),
        maxOutput: Option.some("64K")
      }
      assert.deepStrictEqual(settingsOf(yield* resolve(box.dir, options, fromEnv)), {
        ...envSettings,
        claudeExecutable: "/option/claude",
        workDir: "/option/work",
        allowedWorkDirs: ["/option/a", "/option/b"],
        codexSkipGitCheck: true,
        ollamaUrl: "http://localhost:5555/",
        stripEnv: ["OPTION_SECRET"],
        taskTimeoutMillis: 7_200_000,
        maxOutputBytes: 64 * 1024
      })
      // Each setting falls back on its own: an option for one, a variable for another, the file for the rest.
      const mixed = yield* resolve(
        box.dir,
        { codexExecutable: Option.some("/option/codex") },
        { RELAYKEEP_WORK_DIR: "/env/work" }
      )
      assert.deepStrictEqual(settingsOf(mixed), {
        ...fileSettings,
        codexExecutable: "/option/codex",
        workDir: "/env/work"
      })
    })
  )

  for (const [name, config, env, field, reason] of [
    ["an unknown key in config.json", '{"claude_exe": "/x"}', {}, "config.json", /claude_exe/],
    ["a config.json that is not JSON", "{claude_executable: /x", {}, "config.json", /./],
    ["a number where config.json wants text", '{"task_timeout": 90}', {}, "config.json", /task_timeout/],
    [
      "a non-loopback URL in a variable",
      undefined,
      { RELAYKEEP_OLLAMA_URL: "http://example.com" },
      "--ollama-url",
      /example\.com/
    ],
    ["an https URL in config.json", '{"openai_url": "https://127.0.0.1:1"}', {}, "--openai-url", /https:/],
    ["a bad duration", undefined, { RELAYKEEP_TASK_TIMEOUT: "soon" }, "--task-timeout", /not a duration/],
    ["a zero grace", '{"kill_grace": "0s"}', {}, "--kill-grace", /longer than zero/],
    ["a bad size", undefined, { RELAYKEEP_MAX_OUTPUT: "lots" }, "--max-output", /not a size/],
    [
      "a relative allowed work dir in config.json",
      '{"allow_work_dirs": ["/ok", "projects"]}',
      {},
      "--allow-work-dir",
      /entry 2 must be an absolute path/
    ],
    [
      "a switch that is neither on nor off",
      undefined,
      { RELAYKEEP_CODEX_SKIP_GIT_CHECK: "maybe" },
      "RELAYKEEP_CODEX_SKIP_GIT_CHECK",
      /must be 1, true or yes/
    ],
    [
      "a string for the skip switch in config.json",
      '{"codex_skip_git_check": "yes"}',
      {},
      "config.json",
      /codex_skip_git_check/
    ]
  ] as const) {
    it.scopedLive(`${name} is an InvalidInput naming the field`, () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const failure = failureOf(yield* resolve(box.dir, {}, env, config))
        if (failure._tag !== "InvalidInput") return assert.fail(`expected InvalidInput, got ${failure._tag}`)
        const expected = field === "config.json" ? path.join(box.dir, "config.json") : field
        assert.strictEqual(failure.field, expected)
        assert.match(failure.reason, reason)
      })
    )
  }
})
