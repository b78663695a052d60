/** A worker that stops mid-run (SIGINT, shutdown) still takes the provider's whole tree with it. */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Schedule } from "effect"
import { existsSync } from "node:fs"
import { fakeCodex, isRunning, providerLayer, runProvider, sandbox, settings } from "../support/fakeCli.js"

describe("interrupting a provider run", () => {
  it.scopedLive("stops the CLI and a grandchild that ignores SIGTERM", () =>
    Effect.gen(function* () {
      const box = yield* sandbox
      const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir, killGraceMillis: 1000 })
      const run = yield* Effect.fork(
        runProvider({ provider: "codex", model: "m", prompt: "p" }).pipe(
          Effect.provide(providerLayer(config, box.env("grandchild")))
        )
      )
      // Wait (bounded) until the fake has started its grandchild and written both pids.
      yield* Effect.sync(() => existsSync(box.pidsFile)).pipe(
        Effect.repeat({ until: (ready) => ready, schedule: Schedule.spaced("50 millis") }),
        Effect.timeout("20 seconds")
      )
      const pids = box.pids()
      assert.isTrue(isRunning(pids.grandchild), "the grandchild runs before the interruption")
      yield* Fiber.interrupt(run)
      assert.isFalse(isRunning(pids.child), "the CLI is gone")
      assert.isFalse(isRunning(pids.grandchild), "the grandchild is gone")
    })
  )
})
