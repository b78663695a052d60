/**
 * Provider settings through the built CLI: an option beats RELAYKEEP_* variables, which beat
 * `<root>/config.json`; a bad config.json stops the worker before it claims anything.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { PassReport } from "../../src/worker/pass.js"
import { failureOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { doctorReport } from "../support/doctor.js"
import { sandbox } from "../support/fakeCli.js"
import { seedTasks } from "../support/stores.js"

/** A data root holding one queued task, which a worker that wrongly went ahead would take. */
const rootWithQueuedTask = Effect.gen(function* () {
  const box = yield* sandbox
  const root = path.join(box.dir, "root")
  yield* Effect.promise(() => seedTasks(root, [{ id: "t", payload: {} }]))
  return root
})

describe("provider settings through the CLI", { timeout: 180_000 }, () => {
  it.scopedLive("through the CLI: option beats RELAYKEEP_CLAUDE_EXECUTABLE beats config.json", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const root = path.join(box.dir, "root")
      fs.mkdirSync(root)
      fs.writeFileSync(
        path.join(root, "config.json"),
        JSON.stringify({
          claude_executable: "/file/claude",
          codex_executable: "/file/codex",
          work_dir: "/file/work"
        })
      )
      const targets = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) =>
        Effect.map(
          Effect.promise(() => relaykeep(["doctor", "--json", "--root", root, ...args], { env })),
          (result) => {
            const out = doctorReport(result)
            return [out.work_dir, ...out.providers.slice(0, 2).map((d) => d.target)]
          }
        )
      const env = { RELAYKEEP_CLAUDE_EXECUTABLE: "/env/claude" }
      assert.deepStrictEqual(yield* targets([], {}), ["/file/work", "/file/claude", "/file/codex"])
      assert.deepStrictEqual(yield* targets([], env), ["/file/work", "/env/claude", "/file/codex"])
      assert.deepStrictEqual(yield* targets(["--claude-executable", "/option/claude"], env), [
        "/file/work",
        "/option/claude",
        "/file/codex"
      ])
    })
  )

  it.scopedLive(
    "through the CLI: a bad config.json key stops the worker (exit 2) before it claims anything",
    () =>
      Effect.gen(function* () {
        const root = yield* rootWithQueuedTask
        fs.writeFileSync(
          path.join(root, "config.json"),
          JSON.stringify({ claude_executable: "/x", model: "opus" })
        )
        const result = yield* Effect.promise(() => relaykeep(["worker", "--root", root]))
        const message = failureOutput(result, 2, "InvalidInput")
        assert.isTrue(message.startsWith(`${path.join(root, "config.json")}: `), message)
        assert.match(message, /model/)
        fs.rmSync(path.join(root, "config.json"))
        const pass = yield* Effect.promise(() => relaykeep(["worker", "--root", root]))
        assert.strictEqual(jsonOutput(PassReport, pass).dispatched.length, 1, "the task was still queued")
      })
  )

  it.scopedLive(
    "through the CLI: a bad variable behind a flag is one usage line naming the variable (exit 2)",
    () =>
      Effect.gen(function* () {
        const root = yield* rootWithQueuedTask
        for (const [variable, value, reason] of [
          ["RELAYKEEP_TASK_TIMEOUT", "soon", "is not a duration (try 90s, 5m, 2h)"],
          ["RELAYKEEP_STRIP_ENV", "AWS_*,not a name", "entry 2 must be a variable name"]
        ] as const) {
          const result = yield* Effect.promise(() =>
            relaykeep(["worker", "--root", root], { env: { [variable]: value } })
          )
          assert.strictEqual(result.code, 2, result.stderr)
          assert.strictEqual(result.stdout, "")
          assert.isTrue(result.stderr.startsWith(`UsageError: ${variable}: ${reason}`), result.stderr)
          assert.strictEqual(result.stderr.trimEnd().split("\n").length, 1, result.stderr)
        }
        const pass = yield* Effect.promise(() => relaykeep(["worker", "--root", root]))
        assert.strictEqual(jsonOutput(PassReport, pass).dispatched.length, 1, "the task was still queued")
      })
  )
})
