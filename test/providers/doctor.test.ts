/**
 * `relaykeep doctor` against the fakes and fake servers: versions, the work dir, the models the
 * servers list, and the problems it finds, all without a single model call.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import { jsonOutput, relaykeep } from "../support/cli.js"
import { DoctorOutput } from "../support/doctor.js"
import { fakeClaude, fakeCodex, sandbox } from "../support/fakeCli.js"
import { fakeServer, json, modelServer, ollamaModels, openAiModels } from "../support/fakeModelServer.js"

const doctor = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) =>
  Effect.promise(() => relaykeep(["doctor", ...args], { env }))

describe("relaykeep doctor", { timeout: 180_000 }, () => {
  it.scopedLive("lists versions, the work dir and the models, and spends no model call", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const ollama = yield* fakeServer(modelServer())
      const openai = yield* fakeServer(modelServer())
      const args = [
        "--json",
        "--root",
        path.join(box.dir, "root"),
        "--claude-executable",
        fakeClaude,
        "--codex-executable",
        fakeCodex,
        "--work-dir",
        box.workDir,
        "--ollama-url",
        ollama.url,
        "--openai-url",
        openai.url
      ]
      const report = jsonOutput(DoctorOutput, yield* doctor(args, box.env("success")))
      const cliOk = { configured: true, ok: true, work_dir: box.workDir, models: [], problem: null }
      const httpOk = { configured: true, ok: true, version: null, work_dir: null, problem: null }
      assert.deepStrictEqual(report, {
        work_dir: box.workDir,
        providers: [
          { provider: "claude", target: fakeClaude, version: "2.0.0-fake (Claude Code)", ...cliOk },
          { provider: "codex", target: fakeCodex, version: "codex-cli 0.50.0-fake", ...cliOk },
          { provider: "ollama", target: `${ollama.url}/`, models: ollamaModels, ...httpOk },
          { provider: "openai", target: `${openai.url}/`, models: openAiModels, ...httpOk }
        ]
      })
      const runs = box.runs()
      assert.deepStrictEqual(
        runs.map((run) => run.argv),
        [["--version"], ["--version"]],
        "the CLIs were asked for their version only"
      )
      assert.deepStrictEqual(
        runs.map((run) => run.stdin_base64),
        ["", ""]
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
      const report = jsonOutput(DoctorOutput, yield* doctor(["--json", ...args], box.env("success")))
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
      assert.strictEqual(table.code, 0)
      const lines = table.stdout.trimEnd().split("\n")
      assert.match(lines[0] ?? "", /^provider\s+status\s+executable \/ url\s+detail$/)
      assert.match(lines[1] ?? "", new RegExp(`^claude\\s+FAIL\\s+${missing}\\s+${missing} does not exist$`))
      assert.strictEqual(lines.at(-1), `work dir: ${box.workDir}`)
    })
  )

  it.scopedLive("providers that are not configured are off, with nothing run or asked", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const report = jsonOutput(
        DoctorOutput,
        yield* doctor(["--json", "--root", path.join(box.dir, "root")], box.env("success"))
      )
      assert.strictEqual(report.work_dir, null)
      assert.deepStrictEqual(
        report.providers.map((d) => [d.provider, d.configured, d.ok, d.problem]),
        [
          ["claude", false, false, "no --claude-executable"],
          ["codex", false, false, "no --codex-executable"],
          ["ollama", false, false, "no --ollama-url"],
          ["openai", false, false, "no --openai-url"]
        ]
      )
      assert.isFalse(box.recorded())
    })
  )
})
