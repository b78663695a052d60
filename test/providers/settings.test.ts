/**
 * Where the worker's provider settings come from: a flag beats its environment variable (the
 * flag falls back on it as @effect/cli parses the options), which beats `<root>/config.json`,
 * which beats the default. Bad values stop the worker, naming the flag, variable or file key.
 * The dashboard, without flags, reads the same variables.
 */
import { Options, ValidationError } from "@effect/cli"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import type { FileSystem, Path } from "@effect/platform"
import { ConfigProvider, Effect, Either, Layer } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { docText } from "../../src/cli/help.js"
import { providerOptions } from "../../src/cli/providerOptions.js"
import { providerEnvironment, resolveProviderSettings } from "../../src/providers/config.js"
import type { ProviderSettings } from "../../src/providers/settings.js"
import { Host } from "../../src/services/Host.js"
import { failureOf, sandbox } from "../support/fakeCli.js"
import { parseOptions } from "../support/options.js"

const flagsOf = Options.all(providerOptions)

const withConfigFile = (root: string, config: string | undefined) => {
  if (config !== undefined) fs.writeFileSync(path.join(root, "config.json"), config)
}

const provided = <A, E>(
  effect: Effect.Effect<A, E, Host | FileSystem.FileSystem | Path.Path>,
  env: Readonly<Record<string, string>>
) =>
  effect.pipe(
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))),
    Effect.provide(Layer.merge(nodeContextLayer, Host.layerTest({}))),
    Effect.either
  )

/** Parse `args` as the worker's flags in this environment, then resolve them with `config` as config.json. */
const resolve = (
  root: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>,
  config?: string
) => {
  withConfigFile(root, config)
  return provided(
    Effect.flatMap(parseOptions(flagsOf, args, env), (flags) => resolveProviderSettings(flags, root)),
    env
  )
}

/** The same without flags, as the dashboard resolves them. */
const resolveWithoutFlags = (root: string, env: Readonly<Record<string, string>>, config?: string) => {
  withConfigFile(root, config)
  return provided(
    Effect.flatMap(providerEnvironment, (flags) => resolveProviderSettings(flags, root)),
    env
  )
}

/** What a failure says: a usage error's line, or an InvalidInput's field and reason. */
const failureText = (failure: unknown): string =>
  ValidationError.isValidationError(failure)
    ? docText(failure.error)
    : typeof failure === "object" && failure !== null && "field" in failure && "reason" in failure
      ? `${String(failure.field)}: ${String(failure.reason)}`
      : `unexpected failure: ${String(failure)}`

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

const settingsOf = (resolved: Either.Either<ProviderSettings, unknown>) =>
  Either.match(resolved, {
    onLeft: (failure) => assert.fail(failureText(failure)),
    onRight: plain
  })

describe("provider settings", { timeout: 180_000 }, () => {
  it.scopedLive("without flags, variables or config.json: the defaults", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const defaults = {
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
      }
      assert.deepStrictEqual(settingsOf(yield* resolve(box.dir, [], {})), defaults)
      assert.deepStrictEqual(settingsOf(yield* resolveWithoutFlags(box.dir, {})), defaults)
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
        const failure = failureOf(yield* resolve(box.dir, [], {}))
        assert.strictEqual((failure as { _tag?: string })._tag, "StorageError")
        assert.include(failureText(failure), `chmod 600 ${file}`)
        assert.strictEqual(fs.statSync(file).mode & 0o777, 0o666)
      })
  )

  it.scopedLive("config.json alone sets everything; variables beat it; flags beat both", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      assert.deepStrictEqual(settingsOf(yield* resolve(box.dir, [], {}, fromFile)), fileSettings)
      assert.deepStrictEqual(settingsOf(yield* resolve(box.dir, [], fromEnv)), envSettings)
      // The dashboard, without flags, reads the same variables and file.
      assert.deepStrictEqual(settingsOf(yield* resolveWithoutFlags(box.dir, fromEnv)), envSettings)
      // (@effect/cli takes a repeatable flag's value only as the next argument, not after `=`.)
      const flags = [
        "--claude-executable=/option/claude",
        "--work-dir=/option/work",
        ...["--allow-work-dir", "/option/a", "--allow-work-dir", "/option/b"],
        "--codex-skip-git-check",
        "--ollama-url=http://localhost:5555",
        ...["--strip-env", "OPTION_SECRET"],
        "--task-timeout=2h",
        "--max-output=64K"
      ]
      assert.deepStrictEqual(settingsOf(yield* resolve(box.dir, flags, fromEnv)), {
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
      // Each setting falls back on its own: a flag for one, a variable for another, the file for the rest.
      const mixed = yield* resolve(box.dir, ["--codex-executable", "/option/codex"], {
        RELAYKEEP_WORK_DIR: "/env/work",
        RELAYKEEP_PASS_ENV: ""
      })
      assert.deepStrictEqual(settingsOf(mixed), {
        ...fileSettings,
        codexExecutable: "/option/codex",
        workDir: "/env/work"
      })
    })
  )

  it.scopedLive("the skip switch: a flag turns it on; a variable set to off beats config.json's on", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const on = JSON.stringify({ codex_skip_git_check: true })
      const off = JSON.stringify({ codex_skip_git_check: false })
      const skip = (resolved: Either.Either<ProviderSettings, unknown>) =>
        settingsOf(resolved).codexSkipGitCheck
      assert.isTrue(skip(yield* resolve(box.dir, [], {}, on)))
      assert.isFalse(skip(yield* resolve(box.dir, [], { RELAYKEEP_CODEX_SKIP_GIT_CHECK: "0" })))
      assert.isTrue(skip(yield* resolve(box.dir, [], { RELAYKEEP_CODEX_SKIP_GIT_CHECK: "yes" }, off)))
      assert.isTrue(
        skip(yield* resolve(box.dir, ["--codex-skip-git-check"], { RELAYKEEP_CODEX_SKIP_GIT_CHECK: "no" }))
      )
      assert.isFalse(
        skip(yield* resolveWithoutFlags(box.dir, { RELAYKEEP_CODEX_SKIP_GIT_CHECK: "false" }, on))
      )
    })
  )

  for (const [name, args, env, config, expected] of [
    ["an unknown key in config.json", [], {}, '{"claude_exe": "/x"}', /^CONFIG: claude_exe/],
    ["a config.json that is not JSON", [], {}, "{claude_executable: /x", /^CONFIG: ./],
    ["a number where config.json wants text", [], {}, '{"task_timeout": 90}', /^CONFIG: task_timeout/],
    [
      "a non-loopback URL in a flag",
      ["--ollama-url", "http://example.com"],
      {},
      undefined,
      /^--ollama-url: must point at this machine .*example\.com/
    ],
    [
      "a non-loopback URL in a variable",
      [],
      { RELAYKEEP_OLLAMA_URL: "http://example.com" },
      undefined,
      /RELAYKEEP_OLLAMA_URL.*example\.com/
    ],
    [
      "an https URL in config.json",
      [],
      {},
      '{"openai_url": "https://127.0.0.1:1"}',
      /^CONFIG: openai_url: .*https:/
    ],
    [
      "a bad duration in a flag",
      ["--task-timeout", "soon"],
      {},
      undefined,
      /^--task-timeout: is not a duration/
    ],
    [
      "a bad duration in a variable",
      [],
      { RELAYKEEP_TASK_TIMEOUT: "soon" },
      undefined,
      /RELAYKEEP_TASK_TIMEOUT.*not a duration/
    ],
    [
      "a zero grace in config.json",
      [],
      {},
      '{"kill_grace": "0s"}',
      /^CONFIG: kill_grace: must be longer than zero/
    ],
    ["a bad size in a flag", ["--max-output", "lots"], {}, undefined, /^--max-output: is not a size/],
    [
      "a bad size in a variable",
      [],
      { RELAYKEEP_MAX_OUTPUT: "lots" },
      undefined,
      /RELAYKEEP_MAX_OUTPUT.*not a size/
    ],
    [
      "a relative allowed work dir in a flag",
      ["--allow-work-dir", "projects"],
      {},
      undefined,
      /^--allow-work-dir: must be an absolute path/
    ],
    [
      "a relative allowed work dir in config.json",
      [],
      {},
      '{"allow_work_dirs": ["/ok", "projects"]}',
      /^CONFIG: allow_work_dirs: entry 2 must be an absolute path/
    ],
    [
      "a bad pattern in a flag",
      ["--strip-env", "AWS KEY"],
      {},
      undefined,
      /^--strip-env: must be a variable name/
    ],
    [
      "a bad pattern in a variable",
      [],
      { RELAYKEEP_PASS_ENV: "PATH,a-b" },
      undefined,
      /RELAYKEEP_PASS_ENV.*entry 2 must be a variable name/
    ],
    [
      "a switch that is neither on nor off",
      [],
      { RELAYKEEP_CODEX_SKIP_GIT_CHECK: "maybe" },
      undefined,
      /RELAYKEEP_CODEX_SKIP_GIT_CHECK.*must be 1, true or yes/
    ],
    [
      "a string for the skip switch in config.json",
      [],
      {},
      '{"codex_skip_git_check": "yes"}',
      /^CONFIG: codex_skip_git_check/
    ]
  ] as const) {
    it.scopedLive(`${name} fails, naming it`, () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const text = failureText(failureOf(yield* resolve(box.dir, args, env, config)))
        assert.match(text.replace(path.join(box.dir, "config.json"), "CONFIG"), expected)
        // Without flags (the dashboard), a bad variable or file is the same InvalidInput.
        if (args.length === 0) {
          const failure = failureOf(yield* resolveWithoutFlags(box.dir, env))
          assert.strictEqual((failure as { _tag?: string })._tag, "InvalidInput")
          assert.match(failureText(failure).replace(path.join(box.dir, "config.json"), "CONFIG"), expected)
        }
      })
    )
  }
})
