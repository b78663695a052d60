/**
 * The prompt goes to a CLI on stdin and nowhere else: whatever it contains (shell
 * metacharacters, flags, newlines, megabytes) arrives byte for byte and is never interpreted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  fakeClaude,
  onlyRun,
  providerLayer,
  runProvider,
  sandbox,
  settings,
  successOf
} from "../support/fakeCli.js"

const model = "claude-sonnet-4-5"
const payload = (prompt: string) => ({ provider: "claude", model, prompt })

describe("the prompt of a CLI", { timeout: 120_000 }, () => {
  it.scopedLive("shell metacharacters in a prompt arrive byte for byte and run nothing", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const touched = path.join(box.dir, "touched")
      const victim = path.join(box.dir, "victim")
      fs.mkdirSync(victim)
      const prompt = [
        `$(touch ${touched}-dollar)`,
        `\`touch ${touched}-backtick\``,
        `; touch ${touched}-semicolon; rm -rf ${victim}`,
        `&& touch ${touched}-and || touch ${touched}-or | tee ${touched}-pipe > ${touched}-redirect`,
        `"double $HOME" 'single $(id)' \\ \t tab \r\n-p --model evil --dangerously-skip-permissions`,
        "naïve ✓ \u{1F600} 日本語",
        ""
      ].join("\n")
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      successOf(
        yield* runProvider(payload(prompt)).pipe(Effect.provide(providerLayer(config, box.env("success"))))
      )
      const run = onlyRun(box)
      assert.isTrue(run.stdin.equals(Buffer.from(prompt, "utf8")), "stdin is the prompt, byte for byte")
      assert.deepStrictEqual(run.argv, ["-p", "--output-format", "json", "--model", model])
      assert.deepStrictEqual(
        fs.readdirSync(box.dir).filter((name) => name.startsWith("touched")),
        [],
        "nothing the prompt names was executed"
      )
      assert.isTrue(fs.existsSync(victim), "the directory the prompt would remove is still there")
    })
  )

  it.scopedLive("a prompt of 2 MiB arrives whole on stdin", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const prompt = Array.from(
        { length: 2 * 1024 },
        (_, i) => `${String(i).padStart(6, "0")} ${"é".repeat(508)}\n`
      ).join("")
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      successOf(
        yield* runProvider(payload(prompt)).pipe(Effect.provide(providerLayer(config, box.env("success"))))
      )
      const stdin = onlyRun(box).stdin
      assert.strictEqual(stdin.length, 2 * 1024 * 1024)
      assert.isTrue(stdin.equals(Buffer.from(prompt, "utf8")))
    })
  )
})
