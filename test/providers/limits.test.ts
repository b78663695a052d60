/**
 * The bounds on a CLI run: a task timeout that stops the whole process tree (SIGTERM, then
 * SIGKILL after the grace period, even for a grandchild that ignores SIGTERM), an output cap
 * that stops the child, and a crash that fails the task with the right error.
 */
import { assert, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import { Clock, Effect } from "effect"
import {
  failureOf,
  failureTagged,
  fakeClaude,
  fakeCodex,
  isRunning,
  onlyRun,
  providerLayer,
  runProvider,
  sandbox,
  settings,
  submitAndRun,
  successOf,
  workerLayer
} from "../support/fakeCli.js"

const claude = { provider: "claude", model: "sonnet", prompt: "take your time" }
const codex = { provider: "codex", model: "gpt-5-codex", prompt: "take your time" }

/** Run `effect` and measure it on the live clock. */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const start = yield* Clock.currentTimeMillis
    const value = yield* effect
    return { value, millis: (yield* Clock.currentTimeMillis) - start }
  })

describe("limits of a CLI run", { timeout: 120_000 }, () => {
  it.scopedLive("a CLI that hangs past the task timeout fails with ProviderTimeout and is stopped", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({
        claudeExecutable: fakeClaude,
        workDir: box.workDir,
        // Long enough for node to start the fake (which records its pid) on a loaded machine.
        taskTimeoutMillis: 4000,
        killGraceMillis: 500
      })
      const { value, millis } = yield* timed(
        runProvider(claude).pipe(Effect.provide(providerLayer(config, box.env("hang"))))
      )
      const failure = failureTagged(value, "ProviderTimeout")
      assert.strictEqual(failure.millis, 4000)
      assert.strictEqual(failure.message, "claude did not finish within 4000 ms; its processes were stopped")
      assert.isAtLeast(millis, 4000, "not before the timeout")
      assert.isFalse(isRunning(onlyRun(box).pid), "the CLI is gone")
    })
  )

  it.scopedLive("on timeout no process of the tree survives, not even a grandchild ignoring SIGTERM", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      // Long enough for the fake and its grandchild to start on a loaded machine.
      const config = settings({
        codexExecutable: fakeCodex,
        workDir: box.workDir,
        taskTimeoutMillis: 10_000,
        // Long enough for the grandchild to note the SIGTERM it ignores before SIGKILL comes.
        killGraceMillis: 2000
      })
      const failure = failureTagged(
        yield* runProvider(codex).pipe(Effect.provide(providerLayer(config, box.env("grandchild")))),
        "ProviderTimeout"
      )
      assert.strictEqual(failure.provider, "codex")
      const pids = box.pids()
      assert.strictEqual(pids.child, onlyRun(box).pid)
      assert.notStrictEqual(pids.grandchild, pids.child)
      assert.deepStrictEqual(
        box.ignoredTerms(),
        ["SIGTERM ignored"],
        "the grandchild got SIGTERM and ignored it"
      )
      assert.isFalse(isRunning(pids.child), "the CLI is gone")
      assert.isFalse(isRunning(pids.grandchild), "the grandchild is gone (SIGKILL after the grace period)")
    })
  )

  for (const [name, payload, executable] of [
    ["claude", claude, { claudeExecutable: fakeClaude }],
    ["codex", codex, { codexExecutable: fakeCodex }]
  ] as const) {
    it.scopedLive(`${name}: output past --max-output fails with OutputTooLarge and the CLI is stopped`, () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const config = settings({ ...executable, workDir: box.workDir, maxOutputBytes: 64 * 1024 })
        // The fake writes 4 MiB and then sleeps: it is gone only if the worker stopped it.
        const failure = failureTagged(
          yield* runProvider(payload).pipe(Effect.provide(providerLayer(config, box.env("huge")))),
          "OutputTooLarge"
        )
        assert.strictEqual(failure.limitBytes, 64 * 1024)
        assert.strictEqual(failure.message, `${name} wrote more than 65536 bytes; it was stopped`)
        assert.isFalse(isRunning(onlyRun(box).pid), "the CLI is gone")
      })
    )
  }

  it.scopedLive("the cap is exact: output of exactly --max-output bytes passes, one byte less fails", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const layer = (maxOutputBytes: number) =>
        providerLayer(
          settings({ claudeExecutable: fakeClaude, workDir: box.workDir, maxOutputBytes }),
          box.env("success")
        )
      successOf(yield* runProvider(claude).pipe(Effect.provide(layer(64 * 1024))))
      const size = box.stdoutBytes().length
      const exact = successOf(yield* runProvider(claude).pipe(Effect.provide(layer(size))))
      assert.strictEqual(exact.receipt?.output_bytes, size)
      const under = failureTagged(
        yield* runProvider(claude).pipe(Effect.provide(layer(size - 1))),
        "OutputTooLarge"
      )
      assert.strictEqual(under.limitBytes, size - 1)
    })
  )

  it.scopedLive("a CLI killed by a signal fails with ProviderFailed, not OutputTooLarge or a timeout", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({
        claudeExecutable: fakeClaude,
        workDir: box.workDir,
        maxOutputBytes: 64 * 1024
      })
      const failure = failureOf(
        yield* runProvider(claude).pipe(Effect.provide(providerLayer(config, box.env("signal"))))
      )
      assert.strictEqual(failure._tag, "ProviderFailed", `got ${failure._tag}: ${failure.message}`)
    })
  )

  it.scopedLive("after a successful run, a background process the CLI left behind is stopped too", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir, killGraceMillis: 2000 })
      successOf(yield* runProvider(claude).pipe(Effect.provide(providerLayer(config, box.env("daemon")))))
      const pids = box.pids()
      assert.deepStrictEqual(
        box.ignoredTerms(),
        ["SIGTERM ignored"],
        "the leftover got SIGTERM and ignored it"
      )
      assert.isFalse(isRunning(pids.child))
      assert.isFalse(isRunning(pids.grandchild), "the leftover is gone (SIGKILL after the grace period)")
    })
  )

  it.scopedLive("a CLI that exits without reading a large prompt fails cleanly with its stderr", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      const failure = failureTagged(
        yield* runProvider({ ...claude, prompt: "p".repeat(4 * 1024 * 1024) }).pipe(
          Effect.provide(providerLayer(config, box.env("no_stdin")))
        ),
        "ProviderFailed"
      )
      assert.strictEqual(failure.message, "claude: exited with code 2 without a result")
      assert.strictEqual(failure.stderr_tail, "fake-claude: refusing to read stdin")
    })
  )

  it.scopedLive("an attempt stopped by the task timeout still leaves a receipt (issue item 11)", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({
        claudeExecutable: fakeClaude,
        workDir: box.workDir,
        taskTimeoutMillis: 500,
        killGraceMillis: 500
      })
      const view = yield* submitAndRun(claude).pipe(Effect.provide(workerLayer(config, box.env("hang"))))
      assert.strictEqual(view.error?.tag, "ProviderTimeout")
      const receipt = view.attempts[0]?.receipt
      if (receipt === undefined) return assert.fail("the timed-out attempt has no receipt")
      assert.strictEqual(receipt.provider, "claude")
      assert.strictEqual(receipt.requested_model, "sonnet")
      assert.strictEqual(receipt.exit_code, null)
      assert.isAtLeast(receipt.duration_ms, 500)
    })
  )

  it.scopedLive(
    "a timed-out attempt's receipt keeps the hash and size of the output so far, and Codex's events",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const config = settings({
          codexExecutable: fakeCodex,
          workDir: box.workDir,
          taskTimeoutMillis: 1500,
          killGraceMillis: 500
        })
        const payload = { provider: "codex", model: "gpt-5-codex", prompt: "hello" }
        const view = yield* submitAndRun(payload).pipe(
          Effect.provide(workerLayer(config, box.env("partial_hang")))
        )
        assert.strictEqual(view.error?.tag, "ProviderTimeout")
        const receipt = view.attempts[0]?.receipt
        const written = box.stdoutBytes()
        assert.isAbove(written.length, 0)
        assert.strictEqual(receipt?.output_bytes, written.length)
        assert.strictEqual(receipt?.output_sha256, createHash("sha256").update(written).digest("hex"))
        assert.isNull(receipt?.exit_code)
        assert.deepStrictEqual(receipt?.events, [
          { type: "error", message: "Reconnecting... 1/5 (stream disconnected before completion)" }
        ])
      })
  )
})
