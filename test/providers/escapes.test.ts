/**
 * Issue 15, point 7: no process outlives its attempt, not even one that left the CLI's process
 * group. The fakes make the two escapes real programs make: a daemon that double-forks into a
 * session of its own keeping the environment (setsid_escape), and a helper in a group of its own
 * in the CLI's session with a stripped environment, as Codex starts its MCP servers
 * (session_member). Both ignore SIGTERM, so only the SIGKILL after the grace can end them, and
 * both would run on for the fake's 30 s lifetime if nothing stopped them. Each ending of an
 * attempt is checked: a timeout, an interruption (a cancel, a worker shutdown) and a normal exit.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Schedule } from "effect"
import { existsSync } from "node:fs"
import type { Sandbox } from "../support/fakeCli.js"
import {
  failureTagged,
  fakeCodex,
  isRunning,
  onlyRun,
  providerLayer,
  runProvider,
  sandbox,
  settings,
  successOf
} from "../support/fakeCli.js"

const codex = { provider: "codex", model: "gpt-5-codex", prompt: "leave something behind" }

/**
 * Nothing of the attempt runs (polled with a bound: far below the grandchild's own lifetime),
 * and the grandchild ignored exactly one SIGTERM first: the stop reached it, and SIGKILL ended it.
 */
const assertAttemptGone = (box: Sandbox) =>
  Effect.gen(function* () {
    const pids = box.pids()
    assert.strictEqual(pids.child, onlyRun(box).pid)
    assert.notStrictEqual(pids.grandchild, pids.child)
    const gone = yield* Effect.sync(() => box.survivors()).pipe(
      Effect.repeat({ until: (left) => left.length === 0, schedule: Schedule.spaced(Duration.millis(100)) }),
      Effect.timeoutOption(Duration.seconds(5))
    )
    assert.isTrue(Option.isSome(gone), `survivors: ${box.survivors().join("; ")}`)
    assert.isFalse(isRunning(pids.child), "the CLI is gone")
    assert.isFalse(isRunning(pids.grandchild), "the grandchild is gone")
    assert.deepStrictEqual(box.ignoredTerms(), ["SIGTERM ignored"], "it got SIGTERM once, and ignored it")
  })

const escapes = [
  ["setsid_escape", "a grandchild in a session of its own (double fork, setsid)"],
  ["session_member", "a grandchild in a group of its own in the CLI's session, environment stripped"]
] as const

describe("no process outlives its attempt", { timeout: 120_000 }, () => {
  for (const [scenario, what] of escapes) {
    it.scopedLive(`${scenario}: on timeout, ${what} is stopped`, () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const config = settings({
          codexExecutable: fakeCodex,
          workDir: box.workDir,
          // Long enough for the fake and its grandchildren to start on a loaded machine.
          taskTimeoutMillis: 8_000,
          // Long enough for the grandchild to note the SIGTERM it ignores before SIGKILL comes.
          killGraceMillis: 2_000
        })
        failureTagged(
          yield* runProvider(codex).pipe(Effect.provide(providerLayer(config, box.env(scenario)))),
          "ProviderTimeout"
        )
        yield* assertAttemptGone(box)
      })
    )

    it.scopedLive(`${scenario}: on interruption (cancel, shutdown), ${what} is stopped`, () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir, killGraceMillis: 2_000 })
        const run = yield* Effect.fork(
          runProvider(codex).pipe(Effect.provide(providerLayer(config, box.env(scenario))))
        )
        yield* Effect.sync(() => existsSync(box.pidsFile)).pipe(
          Effect.repeat({ until: (ready) => ready, schedule: Schedule.spaced(Duration.millis(50)) }),
          Effect.timeout(Duration.seconds(20))
        )
        assert.isTrue(isRunning(box.pids().grandchild), "the grandchild runs before the interruption")
        yield* Fiber.interrupt(run)
        yield* assertAttemptGone(box)
      })
    )

    it.scopedLive(`${scenario}: after a normal exit, ${what} left behind is stopped`, () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const config = settings({ codexExecutable: fakeCodex, workDir: box.workDir, killGraceMillis: 2_000 })
        const outcome = successOf(
          yield* runProvider(codex).pipe(
            Effect.provide(providerLayer(config, box.env(scenario, { FAKE_DAEMON: "1" })))
          )
        )
        assert.strictEqual(outcome.receipt?.exit_code, 0)
        yield* assertAttemptGone(box)
      })
    )
  }
})
