/**
 * `relaykeep doctor` against the fakes and fake servers: each configured provider's checks
 * (executable, version, login, work dir, git repository, server, models), the exit code that
 * says whether a task could run now, and not a single model call. The real CLIs' own status
 * output is replayed in test/providers/cliFixtures.test.ts and run in test/e2e/agentClis.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { relaykeep } from "../support/cli.js"
import type { DoctorCheck } from "../support/doctor.js"
import { doctorReport } from "../support/doctor.js"
import { fakeClaude, fakeCodex, sandbox } from "../support/fakeCli.js"
import { fakeServer, json, modelServer, ollamaModels, openAiModels } from "../support/fakeModelServer.js"

const doctor = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) =>
  Effect.promise(() => relaykeep(["doctor", ...args], { env }))

/** A sandbox whose work dir is a git repository, with a HOME of its own (no user's Codex config). */
const gitSandbox = Effect.map(sandbox, (box) => {
  execFileSync("git", ["init", "--quiet", box.workDir])
  return box
})

const cliArgs = (root: string, workDir: string) => [
  "--json",
  "--root",
  root,
  "--claude-executable",
  fakeClaude,
  "--codex-executable",
  fakeCodex,
  "--work-dir",
  workDir
]

/** Doctor's flags for Codex alone, in the sandbox's work dir. */
const codexOnly = (box: { readonly dir: string; readonly workDir: string }) => [
  "--json",
  "--root",
  path.join(box.dir, "root"),
  "--codex-executable",
  fakeCodex,
  "--work-dir",
  box.workDir
]

describe("relaykeep doctor", { timeout: 180_000 }, () => {
  it.scopedLive("every check passes: versions, logins, the git repository, the models; no model call", () =>
    Effect.gen(function* () {
      const box = yield* gitSandbox
      const ollama = yield* fakeServer(modelServer())
      const openai = yield* fakeServer(modelServer())
      const args = [
        ...cliArgs(path.join(box.dir, "root"), box.workDir),
        "--ollama-url",
        ollama.url,
        "--openai-url",
        openai.url,
        "--ollama-model",
        ollamaModels[0] ?? ""
      ]
      const report = doctorReport(yield* doctor(args, box.env("success", { HOME: box.dir })))
      assert.isTrue(report.ok)
      const paths: ReadonlyArray<DoctorCheck> = [
        { check: "executable", ok: true, detail: "an executable file" },
        { check: "work_dir", ok: true, detail: "a directory" }
      ]
      const cli = { configured: true, ok: true, work_dir: box.workDir, models: [], problem: null }
      const http = { configured: true, ok: true, version: null, work_dir: null, problem: null }
      assert.deepStrictEqual(report, {
        ok: true,
        work_dir: box.workDir,
        providers: [
          {
            provider: "claude",
            target: fakeClaude,
            version: "2.0.0-fake (Claude Code)",
            ...cli,
            checks: [
              ...paths,
              { check: "version", ok: true, detail: "2.0.0-fake (Claude Code)" },
              { check: "login", ok: true, detail: "logged in (api_key from ANTHROPIC_API_KEY)" }
            ]
          },
          {
            provider: "codex",
            target: fakeCodex,
            version: "codex-cli 0.50.0-fake",
            ...cli,
            checks: [
              ...paths,
              { check: "version", ok: true, detail: "codex-cli 0.50.0-fake" },
              { check: "login", ok: true, detail: "logged in (`codex login status`)" },
              { check: "git_repository", ok: true, detail: `${box.workDir} is a git repository` }
            ]
          },
          {
            provider: "ollama",
            target: `${ollama.url}/`,
            models: ollamaModels,
            ...http,
            checks: [
              { check: "server", ok: true, detail: `lists ${ollamaModels.length} models` },
              { check: "model", ok: true, detail: `${ollamaModels[0]} is listed` }
            ]
          },
          {
            provider: "openai",
            target: `${openai.url}/`,
            models: openAiModels,
            ...http,
            checks: [{ check: "server", ok: true, detail: `lists ${openAiModels.length} models` }]
          }
        ]
      })
      assert.sameDeepMembers(
        box.runs().map((run) => run.argv),
        [["--version"], ["auth", "status"], ["--version"], ["login", "status"]],
        "the CLIs were asked for their version and login status only"
      )
      assert.deepStrictEqual(
        box.runs().map((run) => run.stdin_base64),
        ["", "", "", ""]
      )
      assert.deepStrictEqual(
        ollama.requests.map((r) => `${r.method} ${r.path}`),
        ["GET /api/tags"]
      )
      assert.deepStrictEqual(
        openai.requests.map((r) => `${r.method} ${r.path}`),
        ["GET /v1/models"]
      )
    })
  )

  it.scopedLive("CLIs that are not logged in fail, and doctor exits 1 naming them", () =>
    Effect.gen(function* () {
      const box = yield* gitSandbox
      const result = yield* doctor(
        cliArgs(path.join(box.dir, "root"), box.workDir),
        box.env("success", { HOME: box.dir, FAKE_LOGGED_IN: "no" })
      )
      const report = doctorReport(result)
      const [claude, codex] = report.providers
      assert.isFalse(report.ok)
      assert.strictEqual(claude?.problem, "not logged in: run `claude` and log in as the worker's user")
      assert.strictEqual(codex?.problem, "not logged in: run `codex login` as the worker's user")
      assert.notInclude(result.stdout, "sk-fake", "the masked key login status prints is never repeated")
    })
  )

  it.scopedLive("Codex needs no login for a model provider of the user's own, and that server is asked", () =>
    Effect.gen(function* () {
      const box = yield* gitSandbox
      const server = yield* fakeServer(modelServer())
      const codexHome = path.join(box.dir, "codex-home")
      fs.mkdirSync(codexHome)
      const config = (extra: string) =>
        fs.writeFileSync(
          path.join(codexHome, "config.toml"),
          `model = "m" # the default model\nmodel_provider = "local"\n\n[model_providers.local]\nname = "Local"\nbase_url = "${server.url}/v1"\n${extra}`
        )
      const args = codexOnly(box)
      const env = (extra: Record<string, string> = {}) =>
        box.env("success", { HOME: box.dir, CODEX_HOME: codexHome, FAKE_LOGGED_IN: "no", ...extra })
      const codexOf = (report: ReturnType<typeof doctorReport>) => report.providers[1]

      config("")
      const open = codexOf(doctorReport(yield* doctor(args, env())))
      assert.isTrue(open?.ok, JSON.stringify(open))
      assert.deepInclude(open?.checks ?? [], {
        check: "login",
        ok: true,
        detail: "no login needed: model provider local takes no key"
      })
      assert.deepInclude(open?.checks ?? [], {
        check: "server",
        ok: true,
        detail: `model provider local at ${server.url}/v1 answers`
      })
      assert.deepStrictEqual(
        server.requests.map((r) => `${r.method} ${r.path}`),
        ["GET /v1/models"]
      )

      const listed = codexOf(
        doctorReport(yield* doctor([...args, "--codex-model", openAiModels[0] ?? ""], env()))
      )
      assert.deepInclude(listed?.checks ?? [], {
        check: "model",
        ok: true,
        detail: `${openAiModels[0]} is listed`
      })
      const unlisted = codexOf(
        doctorReport(yield* doctor([...args, "--codex-model", "no-such-model"], env()))
      )
      assert.strictEqual(
        unlisted?.problem,
        "no-such-model is not among the models model provider local lists"
      )

      config(`env_key = "LOCAL_KEY"\n`)
      const keyless = codexOf(doctorReport(yield* doctor(args, env())))
      assert.strictEqual(
        keyless?.problem,
        "model provider local takes its key from LOCAL_KEY, which the worker's environment does not have (or --strip-env removes)"
      )
      const keyed = codexOf(doctorReport(yield* doctor(args, env({ LOCAL_KEY: "k" }))))
      assert.isTrue(keyed?.ok)
      const stripped = codexOf(
        doctorReport(yield* doctor([...args, "--strip-env", "LOCAL_KEY"], env({ LOCAL_KEY: "k" })))
      )
      assert.isFalse(stripped?.ok, "what the worker strips, Codex will not have")

      config(`requires_openai_auth = true\n`)
      assert.strictEqual(
        codexOf(doctorReport(yield* doctor(args, env())))?.problem,
        "not logged in and model provider local requires an OpenAI login: run `codex login` as the worker's user"
      )
    })
  )

  it.scopedLive("a Codex work dir outside git fails unless the worker skips the check", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const args = codexOnly(box)
      const env = box.env("success", { HOME: box.dir })
      const refused = doctorReport(yield* doctor(args, env)).providers[1]
      assert.strictEqual(
        refused?.problem,
        `the work dir ${box.workDir} is not in a git repository, so Codex refuses to run there: run \`git init\` in it, or start the worker with --codex-skip-git-check`
      )
      const skipped = doctorReport(yield* doctor([...args, "--codex-skip-git-check"], env)).providers[1]
      assert.isTrue(skipped?.ok)
      assert.deepInclude(skipped?.checks ?? [], {
        check: "git_repository",
        ok: true,
        detail: "not required: --codex-skip-git-check"
      })
    })
  )

  it.scopedLive("a model the server does not list fails the server's row", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const ollama = yield* fakeServer(modelServer())
      const report = doctorReport(
        yield* doctor(
          [
            "--json",
            "--root",
            path.join(box.dir, "root"),
            "--ollama-url",
            ollama.url,
            "--ollama-model",
            "no-such:7b"
          ],
          box.env("success")
        )
      )
      assert.strictEqual(
        report.providers[2]?.problem,
        `no-such:7b is not among the models ${ollama.url}/ lists`
      )
    })
  )

  it.scopedLive("shows a problem for a missing or relative executable and for servers that fail", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const gone = yield* Effect.scoped(fakeServer(modelServer()))
      const broken = yield* fakeServer(() => json({ error: "boom" }, 500))
      const missing = path.join(box.dir, "no-such-claude")
      const args = [
        "--root",
        path.join(box.dir, "root"),
        "--claude-executable",
        missing,
        "--codex-executable",
        "bin/codex",
        "--work-dir",
        box.workDir,
        "--ollama-url",
        gone.url,
        "--openai-url",
        broken.url
      ]
      const report = doctorReport(yield* doctor(["--json", ...args], box.env("success")))
      const [claude, codex, ollama, openai] = report.providers
      assert.deepStrictEqual(
        report.providers.map((d) => [d.provider, d.configured, d.ok]),
        [
          ["claude", true, false],
          ["codex", true, false],
          ["ollama", true, false],
          ["openai", true, false]
        ]
      )
      assert.strictEqual(claude?.problem, `${missing} does not exist`)
      assert.strictEqual(codex?.problem, "--codex-executable must be an absolute path")
      assert.match(ollama?.problem ?? "", /^does not answer/)
      assert.strictEqual(openai?.problem, `HTTP 500 from ${broken.url}/v1/models`)
      assert.isFalse(box.recorded(), "nothing was run")
      assert.deepStrictEqual(
        broken.requests.map((r) => `${r.method} ${r.path}`),
        ["GET /v1/models"]
      )

      const table = yield* doctor(args, box.env("success"))
      assert.strictEqual(table.code, 1, "a FAIL row makes the exit code 1")
      assert.strictEqual(
        table.stderr,
        "ProvidersNotReady: not ready: claude, codex, ollama, openai (the report above says why)\n"
      )
      const lines = table.stdout.trimEnd().split("\n")
      assert.match(lines[0] ?? "", /^provider\s+status\s+executable \/ url\s+detail$/)
      assert.match(lines[1] ?? "", new RegExp(`^claude\\s+FAIL\\s+${missing}\\s+${missing} does not exist$`))
      assert.strictEqual(lines.at(-1), `work dir: ${box.workDir}`)
    })
  )

  it.scopedLive("providers that are not configured are off, with nothing run or asked, and exit 0", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const report = doctorReport(
        yield* doctor(["--json", "--root", path.join(box.dir, "root")], box.env("success"))
      )
      assert.isTrue(report.ok)
      assert.strictEqual(report.work_dir, null)
      assert.deepStrictEqual(
        report.providers.map((d) => [d.provider, d.configured, d.ok, d.problem, d.checks.length]),
        [
          ["claude", false, false, "no --claude-executable", 0],
          ["codex", false, false, "no --codex-executable", 0],
          ["ollama", false, false, "no --ollama-url", 0],
          ["openai", false, false, "no --openai-url", 0]
        ]
      )
      assert.isFalse(box.recorded())
    })
  )
})
