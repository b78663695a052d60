/**
 * Codex through the fake `codex`: `codex exec --json --model M -`, the prompt on stdin only,
 * the final agent message and token counts from its JSONL events, and its failures.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  failureTagged,
  fakeCodex,
  onlyRun,
  providerLayer,
  runProvider,
  sandbox,
  settings,
  submitAndRun,
  successOf,
  workerLayer
} from "../support/fakeCli.js"

const model = "gpt-5-codex"
const payload = (prompt: string) => ({ provider: "codex", model, prompt })

describe("codex provider", { timeout: 120_000 }, () => {
  it.scopedLive("runs `codex exec --json --model M -` in the work dir, the prompt on stdin only", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const touched = path.join(box.dir, "touched")
      const prompt = `Fix the bug.\n$(touch ${touched}) \`touch ${touched}\`; touch ${touched} "it's" ✓\n`
      const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir })
      const outcome = yield* runProvider(payload(prompt)).pipe(
        Effect.provide(providerLayer(config, box.env("success")))
      )
      const run = onlyRun(box)
      assert.deepStrictEqual(run.argv, ["exec", "--json", "--model", model, "-"])
      assert.isTrue(run.stdin.equals(Buffer.from(prompt, "utf8")), "stdin is the prompt, byte for byte")
      assert.strictEqual(run.cwd, fs.realpathSync(box.workDir))
      assert.isFalse(fs.existsSync(touched), "nothing the prompt names was executed")
      const done = successOf(outcome)
      assert.deepStrictEqual(done.result, {
        provider: "codex",
        requested_model: model,
        model: null,
        model_evidence: { verified: false, source: "the codex CLI does not report which model answered" },
        text: "The fake codex answered ✓"
      })
    })
  )

  it.scopedLive("the receipt keeps the token counts of turn.completed, and no cost", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir })
      const view = yield* submitAndRun(payload("hello")).pipe(
        Effect.provide(workerLayer(config, box.env("success")))
      )
      const receipt = view.attempts[0]?.receipt
      const stdout = box.stdoutBytes()
      assert.strictEqual(view.state, "complete")
      assert.deepStrictEqual(receipt?.usage, { input_tokens: 21, cached_input_tokens: 3, output_tokens: 8 })
      assert.strictEqual(receipt?.cost_usd, null)
      assert.strictEqual(receipt?.provider, "codex")
      assert.strictEqual(receipt?.requested_model, model)
      assert.strictEqual(receipt?.model, null)
      assert.strictEqual(receipt?.exit_code, 0)
      assert.strictEqual(receipt?.http_status, null)
      assert.strictEqual(receipt?.output_sha256, createHash("sha256").update(stdout).digest("hex"))
      assert.strictEqual(receipt?.output_bytes, stdout.length)
    })
  )

  it.scopedLive("without turn.completed the usage is null", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir })
      const done = successOf(
        yield* runProvider(payload("hello")).pipe(Effect.provide(providerLayer(config, box.env("bare"))))
      )
      assert.strictEqual(done.receipt?.usage, null)
      assert.strictEqual(done.receipt?.cost_usd, null)
    })
  )

  it.scopedLive("turn.failed fails the task with its message as stdout_error, cut at 300 characters", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir })
      const short = yield* submitAndRun(payload("hello")).pipe(
        Effect.provide(workerLayer(config, box.env("turn_failed", { FAKE_TEXT: "the sandbox denied it" })))
      )
      assert.strictEqual(short.state, "failed")
      assert.deepStrictEqual(short.error, {
        tag: "ProviderFailed",
        message: "codex: the turn failed: the sandbox denied it",
        retryable: false,
        stdout_error: "the sandbox denied it"
      })
      const text = "x".repeat(250) + "y".repeat(250)
      const long = failureTagged(
        yield* runProvider(payload("hello")).pipe(
          Effect.provide(providerLayer(config, box.env("turn_failed", { FAKE_TEXT: text })))
        ),
        "ProviderFailed"
      )
      assert.strictEqual(long.stdout_error, `${text.slice(0, 300)} [truncated]`)
    })
  )

  it.scopedLive("output that is not JSON events fails with a reason, not a crash", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir })
      const failure = failureTagged(
        yield* runProvider(payload("hello")).pipe(
          Effect.provide(providerLayer(config, box.env("malformed")))
        ),
        "ProviderFailed"
      )
      assert.strictEqual(failure.message, "codex: the output is not Codex's JSON events")
      assert.isFalse(failure.retryable)
    })
  )

  it.scopedLive("a non-zero exit keeps the end of stderr, marked [truncated] when cut", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir })
      const stderr = `${"noise ".repeat(200)}\nError: the end of the story`
      const failure = failureTagged(
        yield* runProvider(payload("hello")).pipe(
          Effect.provide(providerLayer(config, box.env("exit", { FAKE_STDERR: stderr, FAKE_EXIT_CODE: "7" })))
        ),
        "ProviderFailed"
      )
      assert.strictEqual(failure.message, "codex: exited with code 7 before its turn ended")
      assert.strictEqual(failure.stderr_tail, `[truncated] ${stderr.slice(-300)}`)
      assert.isTrue(failure.retryable)
      assert.strictEqual(failure.receipt?.exit_code, 7)
    })
  )
})
