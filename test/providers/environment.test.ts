/**
 * The environment a CLI inherits: the worker's own, minus the variables named by --strip-env
 * (settings.stripEnv). Nothing else is added or removed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import {
  fakeClaude,
  fakeCodex,
  onlyRun,
  providerLayer,
  runProvider,
  sandbox,
  settings,
  someTaskId
} from "../support/fakeCli.js"

/** What the launcher adds: the task and attempt the child serves (runProvider's task, attempt 1). */
const taskIdentity = { RELAYKEEP_TASK_ID: someTaskId, RELAYKEEP_ATTEMPT: "1" }

describe("the environment of a CLI", { timeout: 120_000 }, () => {
  for (const [cli, executable] of [
    ["claude", { claudeExecutable: fakeClaude }],
    ["codex", { codexExecutable: fakeCodex }]
  ] as const) {
    it.scopedLive(`${cli}: stripped variables are absent in the child; every other one is passed as is`, () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const environment = box.env("success", {
          ANTHROPIC_API_KEY: "sk-secret-1",
          OPENAI_API_KEY: "sk-secret-2",
          RELAYKEEP_TEST_KEEP: "kept = value with spaces; $(and shell)",
          HOME: box.dir
        })
        const config = settings({
          ...executable,
          workDir: box.workDir,
          stripEnv: ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "NOT_SET_ANYWAY"]
        })
        yield* runProvider({ provider: cli, model: "sonnet", prompt: "hi" }).pipe(
          Effect.provide(providerLayer(config, environment))
        )
        const seen = onlyRun(box).env
        assert.notProperty(seen, "ANTHROPIC_API_KEY")
        assert.notProperty(seen, "OPENAI_API_KEY")
        const { ANTHROPIC_API_KEY: _a, OPENAI_API_KEY: _o, ...expected } = environment
        assert.deepStrictEqual(
          seen,
          { ...expected, ...taskIdentity },
          "exactly the worker's environment minus the stripped names, plus the task's identity"
        )
      })
    )
  }

  it.scopedLive("without --strip-env the child gets exactly the worker's environment, secrets included", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const environment = box.env("success", { ANTHROPIC_API_KEY: "sk-secret-1" })
      const config = settings({ claudeExecutable: fakeClaude, workDir: box.workDir })
      yield* runProvider({ provider: "claude", model: "sonnet", prompt: "hi" }).pipe(
        Effect.provide(providerLayer(config, environment))
      )
      assert.deepStrictEqual(onlyRun(box).env, { ...environment, ...taskIdentity })
    })
  )
})
