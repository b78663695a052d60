/**
 * Providers through the built CLI (run `npm run build` first): submit, a worker pass with the
 * fakes and fake servers, read. The worker's options and environment decide what runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Receipt, TaskView } from "../../src/domain/Task.js"
import { PassReport } from "../../src/worker/pass.js"
import type { RunOptions } from "../support/cli.js"
import { failureOutput, jsonOutput, relaykeep } from "../support/cli.js"
import type { Sandbox } from "../support/fakeCli.js"
import { fakeClaude, fakeCodex, isRunning, onlyRun, sandbox } from "../support/fakeCli.js"
import { fakeServer, modelServer, recordOnly } from "../support/fakeModelServer.js"
import { snapshotTree } from "../support/files.js"
import { seedTasks } from "../support/stores.js"

const cli = (args: ReadonlyArray<string>, options?: RunOptions) =>
  Effect.promise(() => relaykeep(args, options))

const readTask = (root: string, receipt: Receipt) =>
  Effect.map(
    cli(["read", "--root", root, "--task-id", receipt.task_id, "--sha", receipt.payload_sha256]),
    (result) => jsonOutput(TaskView, result)
  )

/** A data root in the sandbox with one task queued (submitted in-process, which is faster). */
const seeded = (box: Sandbox, payload: Readonly<Record<string, unknown>>) =>
  Effect.gen(function* () {
    const root = path.join(box.dir, "root")
    const [receipt] = yield* Effect.promise(() => seedTasks(root, [{ id: "task-1", payload }]))
    if (receipt === undefined) return yield* Effect.die("no receipt")
    return { root, receipt }
  })

describe("providers through the CLI", { timeout: 180_000 }, () => {
  it.scopedLive(
    "submit, worker with --claude-executable, read: the answer, the receipt, the exact command",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const root = path.join(box.dir, "root")
        const touched = path.join(box.dir, "touched")
        const prompt = `Review this.\n$(touch ${touched}) \`touch ${touched}\`; touch ${touched} && echo "it's" ✓\n`
        const submitted = jsonOutput(
          Receipt,
          yield* cli(["submit", "--root", root, "--id", "review-1", "--payload", "-"], {
            stdin: JSON.stringify({ provider: "claude", model: "sonnet", prompt })
          })
        )
        const worker = yield* cli(
          [
            "worker",
            "--root",
            root,
            "--claude-executable",
            fakeClaude,
            "--work-dir",
            box.workDir,
            "--strip-env",
            "TEST_SECRET_*",
            "--strip-env",
            "anthropic_api_key"
          ],
          {
            env: {
              ...box.env("success"),
              TEST_SECRET_ONE: "s3cret",
              ANTHROPIC_API_KEY: "sk-test",
              // The queue's own settings and libpq's go without a flag.
              RELAYKEEP_TEST_SECRET: "s3cret",
              PGPASSWORD: "s3cret",
              TEST_KEEP: "kept"
            }
          }
        )
        assert.deepStrictEqual(jsonOutput(PassReport, worker).dispatched, [submitted.task_id])

        const run = onlyRun(box)
        assert.deepStrictEqual(run.argv, ["-p", "--output-format", "json", "--model", "sonnet"])
        assert.isTrue(run.stdin.equals(Buffer.from(prompt, "utf8")), "stdin is the prompt, byte for byte")
        assert.strictEqual(run.cwd, fs.realpathSync(box.workDir))
        for (const gone of ["TEST_SECRET_ONE", "ANTHROPIC_API_KEY", "RELAYKEEP_TEST_SECRET", "PGPASSWORD"])
          assert.notProperty(run.env, gone)
        assert.strictEqual(run.env["TEST_KEEP"], "kept")
        assert.isFalse(fs.existsSync(touched), "nothing the prompt names was executed")

        const view = yield* readTask(root, submitted)
        assert.strictEqual(view.state, "complete")
        assert.strictEqual(view.error, null)
        const receipt = view.attempts[0]?.receipt
        const stdout = box.stdoutBytes()
        assert.strictEqual(receipt?.provider, "claude")
        assert.strictEqual(receipt?.requested_model, "sonnet")
        assert.strictEqual(receipt?.model, null)
        assert.strictEqual(receipt?.model_evidence.verified, false)
        assert.strictEqual(receipt?.exit_code, 0)
        assert.strictEqual(receipt?.cost_usd, 0.0123)
        assert.strictEqual(receipt?.output_sha256, createHash("sha256").update(stdout).digest("hex"))
        assert.strictEqual(receipt?.output_bytes, stdout.length)
      })
  )

  it.scopedLive("--task-timeout and --kill-grace: a hanging codex fails the task with ProviderTimeout", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const { root, receipt } = yield* seeded(box, {
        provider: "codex",
        model: "gpt-5-codex",
        prompt: "wait"
      })
      // A plain number is seconds; 4 s is long enough for node to start the fake on a loaded machine.
      const args = ["--codex-executable", fakeCodex, "--work-dir", box.workDir, "--task-timeout", "4"]
      const worker = yield* cli(["worker", "--root", root, ...args, "--kill-grace", "500ms"], {
        env: box.env("hang")
      })
      assert.deepStrictEqual(jsonOutput(PassReport, worker).dispatched, [receipt.task_id])
      const view = yield* readTask(root, receipt)
      assert.strictEqual(view.state, "failed")
      assert.deepStrictEqual(view.error, {
        tag: "ProviderTimeout",
        message: "codex did not finish within 4000 ms; its processes were stopped",
        retryable: true
      })
      assert.isFalse(isRunning(onlyRun(box).pid), "the CLI is gone")
    })
  )

  it.scopedLive("--max-output: a flood of output fails the task with OutputTooLarge", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const { root, receipt } = yield* seeded(box, { provider: "claude", model: "sonnet", prompt: "flood" })
      const args = ["--claude-executable", fakeClaude, "--work-dir", box.workDir, "--max-output", "64K"]
      jsonOutput(PassReport, yield* cli(["worker", "--root", root, ...args], { env: box.env("huge") }))
      const view = yield* readTask(root, receipt)
      assert.deepStrictEqual(view.error, {
        tag: "OutputTooLarge",
        message: "claude wrote more than 65536 bytes; it was stopped",
        retryable: false
      })
      assert.isFalse(isRunning(onlyRun(box).pid), "the CLI is gone")
    })
  )

  it.scopedLive("--ollama-url: proxy variables in the worker's environment are ignored", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const proxy = yield* fakeServer(recordOnly)
      const server = yield* fakeServer(modelServer())
      const { root, receipt } = yield* seeded(box, { provider: "ollama", model: "llama3.2:1b", prompt: "hi" })
      const proxies = Object.fromEntries(
        ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"].map((name) => [
          name,
          proxy.url
        ])
      )
      const worker = yield* cli(["worker", "--root", root, "--ollama-url", server.url], {
        env: { ...proxies, NO_PROXY: "", no_proxy: "", NODE_USE_ENV_PROXY: "1" }
      })
      assert.deepStrictEqual(jsonOutput(PassReport, worker).dispatched, [receipt.task_id])
      const view = yield* readTask(root, receipt)
      assert.strictEqual(view.state, "complete")
      assert.strictEqual(view.attempts[0]?.receipt?.model, "llama3.2:1b")
      assert.deepStrictEqual(
        server.requests.map((r) => `${r.method} ${r.path}`),
        ["POST /api/generate"]
      )
      assert.deepStrictEqual(proxy.requests, [], "the proxy saw nothing")
    })
  )

  it.scopedLive(
    "URLs that are not plain http on loopback stop the worker at start: exit 2, nothing claimed",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const { root, receipt } = yield* seeded(box, {
          provider: "ollama",
          model: "llama3.2:1b",
          prompt: "hi"
        })
        const before = snapshotTree(root)
        const cases = [
          [
            "--ollama-url",
            "http://example.com:11434",
            /^--ollama-url: must point at this machine .*example\.com/
          ],
          ["--openai-url", "https://127.0.0.1:8080", /^--openai-url: must use http:, not https:/],
          [
            "--ollama-url",
            "http://10.0.0.1:11434",
            /^--ollama-url: must point at this machine .*10\.0\.0\.1/
          ],
          ["--openai-url", "http://user:pw@127.0.0.1:8080", /^--openai-url: must not carry credentials/],
          ["--ollama-url", "localhost:11434", /^--ollama-url: /]
        ] as const
        for (const [flag, value, reason] of cases) {
          const message = failureOutput(yield* cli(["worker", "--root", root, flag, value]), 2, "UsageError")
          assert.match(message, reason, `${flag} ${value}`)
        }
        assert.deepStrictEqual(snapshotTree(root), before, "the data root is untouched")
        const view = yield* readTask(root, receipt)
        assert.strictEqual(view.state, "queued")
        assert.strictEqual(view.attempt, 0)
      })
  )
})
