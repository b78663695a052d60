/**
 * Claude Code through the fake `claude`: the exact command, the prompt on stdin only, the work
 * dir, the answer and its receipt, and every way a run can fail, each with bounded detail.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  failureTagged,
  fakeClaude,
  onlyRun,
  providerLayer,
  runProvider,
  sandbox,
  settings,
  submitAndRun,
  successOf,
  workerLayer
} from "../support/fakeCli.js"

const model = "claude-sonnet-4-5"
const payload = (prompt: string) => ({ provider: "claude", model, prompt })
const sha256 = (bytes: Buffer) => createHash("sha256").update(bytes).digest("hex")

describe("claude provider", { timeout: 120_000 }, () => {
  it.scopedLive("runs `claude -p --output-format json --model M` in the work dir, the prompt on stdin", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const prompt = "Summarise the repository.\nKeep it short."
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const outcome = yield* runProvider(payload(prompt)).pipe(
        Effect.provide(providerLayer(config, box.env("success")))
      )
      const run = onlyRun(box)
      assert.deepStrictEqual(run.argv, ["-p", "--output-format", "json", "--model", model])
      assert.strictEqual(run.stdin.toString("utf8"), prompt)
      assert.strictEqual(run.cwd, fs.realpathSync(box.workDir))
      assert.deepStrictEqual(successOf(outcome).result, {
        provider: "claude",
        requested_model: model,
        model: null,
        model_evidence: {
          verified: false,
          source: "the claude CLI does not report which model answered",
          model_usage: {
            "claude-sonnet-4-5-20250929": { inputTokens: 12, outputTokens: 34, costUSD: 0.012 },
            "claude-3-5-haiku-20241022": { inputTokens: 3, outputTokens: 1, costUSD: 0.0003 }
          }
        },
        text: "The fake claude answered: naïve café ✓"
      })
    })
  )

  it.scopedLive(
    "a payload's work_dir inside --allow-work-dir: the CLI runs there; without it, nothing starts",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const projects = path.join(box.dir, "projects")
        const repo = path.join(projects, "repo")
        fs.mkdirSync(repo, { recursive: true })
        const withDir = { ...payload("hello"), work_dir: repo }
        const allowed = settings({
          claudeExecutable: fakeClaude,
          workDir: box.workDir,
          allowedWorkDirs: [projects]
        })
        successOf(
          yield* runProvider(withDir).pipe(Effect.provide(providerLayer(allowed, box.env("success"))))
        )
        assert.strictEqual(onlyRun(box).cwd, fs.realpathSync(repo), "ran in the payload's directory")

        const plain = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
        const refused = failureTagged(
          yield* runProvider(withDir).pipe(Effect.provide(providerLayer(plain, box.env("success")))),
          "InvalidPayload"
        )
        assert.match(refused.reason, /^work_dir: this worker runs every task in its own --work-dir/)
        const outside = failureTagged(
          yield* runProvider({ ...withDir, work_dir: box.workDir }).pipe(
            Effect.provide(providerLayer(allowed, box.env("success")))
          ),
          "InvalidPayload"
        )
        assert.match(outside.reason, /^work_dir: is not inside a directory this worker allows/)
        assert.strictEqual(box.runs().length, 1, "no refused task started the CLI")
      })
  )

  it.scopedLive("a successful run leaves a receipt: requested model, no model identity, usage and cost", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const view = yield* submitAndRun(payload("hello")).pipe(
        Effect.provide(workerLayer(config, box.env("success")))
      )
      assert.strictEqual(view.state, "complete")
      const receipt = view.attempts[0]?.receipt
      if (receipt === undefined) return assert.fail("the attempt has no receipt")
      const stdout = box.stdoutBytes()
      assert.deepStrictEqual(
        { ...receipt, started_at: "", ended_at: "", duration_ms: 0 },
        {
          provider: "claude",
          requested_model: model,
          model: null,
          model_evidence: {
            verified: false,
            source: "the claude CLI does not report which model answered",
            model_usage: {
              "claude-sonnet-4-5-20250929": { inputTokens: 12, outputTokens: 34, costUSD: 0.012 },
              "claude-3-5-haiku-20241022": { inputTokens: 3, outputTokens: 1, costUSD: 0.0003 }
            }
          },
          started_at: "",
          ended_at: "",
          duration_ms: 0,
          exit_code: 0,
          http_status: null,
          usage: { input_tokens: 12, output_tokens: 34, cache_read_input_tokens: 5 },
          cost_usd: 0.0123,
          output_sha256: sha256(stdout),
          output_bytes: stdout.length
        }
      )
      assert.notStrictEqual(stdout.length, stdout.toString("utf8").length, "the output has multi-byte text")
      const started = Date.parse(receipt.started_at)
      const ended = Date.parse(receipt.ended_at)
      assert.isAtMost(started, ended)
      assert.strictEqual(receipt.duration_ms, ended - started)
      assert.deepStrictEqual(view.result, {
        provider: "claude",
        requested_model: model,
        model: null,
        model_evidence: receipt.model_evidence,
        text: "The fake claude answered: naïve café ✓"
      })
    })
  )

  it.scopedLive("usage and cost the CLI did not report are null, never estimated", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const view = yield* submitAndRun(payload("hello")).pipe(
        Effect.provide(workerLayer(config, box.env("bare")))
      )
      const receipt = view.attempts[0]?.receipt
      assert.strictEqual(view.state, "complete")
      assert.strictEqual(receipt?.usage, null)
      assert.strictEqual(receipt?.cost_usd, null)
      assert.deepStrictEqual(receipt?.model_evidence, {
        verified: false,
        source: "the claude CLI does not report which model answered"
      })
      assert.strictEqual(receipt?.output_bytes, box.stdoutBytes().length)
    })
  )

  it.scopedLive("is_error fails the task with the result text as stdout_error, and keeps the receipt", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const text = "Credit balance is too low"
      const view = yield* submitAndRun(payload("hello")).pipe(
        Effect.provide(workerLayer(config, box.env("is_error", { FAKE_TEXT: text })))
      )
      assert.strictEqual(view.state, "failed")
      assert.deepStrictEqual(view.error, {
        tag: "ProviderFailed",
        message: "claude: stopped (error_during_execution): Credit balance is too low",
        retryable: false,
        stdout_error: text
      })
      assert.strictEqual(view.attempts[0]?.receipt?.exit_code, 0)
      assert.strictEqual(view.attempts[0]?.receipt?.output_bytes, box.stdoutBytes().length)
    })
  )

  it.scopedLive("a long is_error text is cut at 300 characters and marked [truncated]", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const text = Array.from({ length: 80 }, (_, i) => `error-${i}`).join(" ")
      const failure = failureTagged(
        yield* runProvider(payload("hello")).pipe(
          Effect.provide(providerLayer(config, box.env("is_error", { FAKE_TEXT: text })))
        ),
        "ProviderFailed"
      )
      assert.isAbove(text.length, 300)
      assert.strictEqual(failure.stdout_error, `${text.slice(0, 300)} [truncated]`)
    })
  )

  it.scopedLive("malformed output fails with a reason, not a crash", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const failure = failureTagged(
        yield* runProvider(payload("hello")).pipe(
          Effect.provide(providerLayer(config, box.env("malformed")))
        ),
        "ProviderFailed"
      )
      assert.strictEqual(failure.message, "claude: the output is not Claude's JSON result")
      assert.isFalse(failure.retryable)
      assert.strictEqual(failure.receipt?.output_bytes, box.stdoutBytes().length)
    })
  )

  it.scopedLive("a non-zero exit keeps the last 300 characters of stderr, marked [truncated]", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const stderr = `${Array.from({ length: 120 }, (_, i) => `warning line ${i}`).join("\n")}\nfatal: the last words`
      const view = yield* submitAndRun(payload("hello")).pipe(
        Effect.provide(workerLayer(config, box.env("exit", { FAKE_STDERR: stderr, FAKE_EXIT_CODE: "3" })))
      )
      assert.deepStrictEqual(view.error, {
        tag: "ProviderFailed",
        message: "claude: exited with code 3 without a result",
        retryable: true,
        stderr_tail: `[truncated] ${stderr.slice(-300)}`
      })
      assert.strictEqual(view.attempts[0]?.receipt?.exit_code, 3)
    })
  )

  it.scopedLive("a short stderr is kept whole, unmarked", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const failure = failureTagged(
        yield* runProvider(payload("hello")).pipe(
          Effect.provide(providerLayer(config, box.env("exit", { FAKE_STDERR: "Error: the disk is full\n" })))
        ),
        "ProviderFailed"
      )
      assert.strictEqual(failure.stderr_tail, "Error: the disk is full")
      assert.isTrue(failure.retryable, "a crash without a result may pass on another attempt")
    })
  )

  it.scopedLive("a login error on stderr fails at once, not retryable, saying what to do", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const failure = failureTagged(
        yield* runProvider(payload("hello")).pipe(
          Effect.provide(providerLayer(config, box.env("exit", { FAKE_STDERR: "Error: Not logged in\n" })))
        ),
        "ProviderFailed"
      )
      assert.strictEqual(
        failure.message,
        "claude: not logged in: run `claude` and log in as the worker's user"
      )
      assert.isFalse(failure.retryable)
    })
  )
})
