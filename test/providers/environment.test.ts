/**
 * The environment a CLI inherits: the worker's own, less the queue's secrets (RELAYKEEP_* and
 * PG*, any case), less what --strip-env matches, or with --pass-env only what it matches, plus
 * the task's identity. Seen by the fake CLIs, which record the environment they were given.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { providerEnvironment } from "../../src/providers/environment.js"
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

/** What a worker of a team queue may have in its environment and must not hand an agent. */
const queueSecrets = {
  RELAYKEEP_STORE: "postgres://relaykeep:s3cret@db.internal:5432/queue",
  RELAYKEEP_DASHBOARD_TOKEN: "dashboard-token",
  relaykeep_pg_schema: "team",
  PGPASSWORD: "s3cret",
  PGUSER: "relaykeep",
  pgpassfile: "/home/me/.pgpass"
}

describe("the environment of a CLI", { timeout: 120_000 }, () => {
  for (const [cli, executable] of [
    ["claude", { claudeExecutable: fakeClaude }],
    ["codex", { codexExecutable: fakeCodex }]
  ] as const) {
    it.scopedLive(
      `${cli}: the queue's secrets and what --strip-env matches are absent; the rest is as is`,
      () =>
        Effect.gen(function* () {
          const box = yield* sandbox
          const environment = box.env("success", {
            ...queueSecrets,
            ANTHROPIC_API_KEY: "sk-secret-1",
            aws_secret_access_key: "aws-secret",
            AWS_SESSION_TOKEN: "aws-token",
            KEPT: "kept = value with spaces; $(and shell)",
            HOME: box.dir
          })
          const config = settings({
            ...executable,
            workDir: box.workDir,
            stripEnv: ["anthropic_api_key", "AWS_*", "NOT_SET_ANYWAY"]
          })
          yield* runProvider({ provider: cli, model: "sonnet", prompt: "hi" }).pipe(
            Effect.provide(providerLayer(config, environment))
          )
          const seen = onlyRun(box).env
          const gone = new Set([
            ...Object.keys(queueSecrets),
            "ANTHROPIC_API_KEY",
            "aws_secret_access_key",
            "AWS_SESSION_TOKEN"
          ])
          const expected = Object.fromEntries(Object.entries(environment).filter(([name]) => !gone.has(name)))
          assert.deepStrictEqual(
            seen,
            { ...expected, ...taskIdentity },
            "the worker's environment less the secrets and the stripped names, plus the task's identity"
          )
        })
    )
  }

  it.scopedLive(
    "with --pass-env the child gets only what it matches, and a queue secret only by its exact name",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const environment = box.env("success", {
          ...queueSecrets,
          PGHOST: "localhost",
          LC_ALL: "C",
          OTHER: "x"
        })
        const config = settings({
          claudeExecutable: fakeClaude,
          workDir: box.workDir,
          passEnv: ["PATH", "FAKE_*", "lc_*", "PGHOST", "RELAYKEEP_*"]
        })
        yield* runProvider({ provider: "claude", model: "sonnet", prompt: "hi" }).pipe(
          Effect.provide(providerLayer(config, environment))
        )
        const seen = onlyRun(box).env
        assert.deepStrictEqual(
          Object.keys(seen).sort(),
          [
            ...Object.keys(environment).filter((name) => name.startsWith("FAKE_")),
            "LC_ALL",
            "PATH",
            "PGHOST",
            ...Object.keys(taskIdentity)
          ].sort()
        )
      })
  )
})

describe("the environment rule", () => {
  const environment = { ...queueSecrets, PATH: "/bin", AWS_KEY: "a", aws_other: "b", PGHOST: "h" }

  it("by default only the queue's secrets go, in any case", () =>
    assert.deepStrictEqual(providerEnvironment(environment, { strip: [], pass: [] }), {
      PATH: "/bin",
      AWS_KEY: "a",
      aws_other: "b"
    }))

  it("a strip pattern matches any case and any run of characters", () =>
    assert.deepStrictEqual(providerEnvironment(environment, { strip: ["aws_*"], pass: [] }), {
      PATH: "/bin"
    }))

  it("an allowlist pattern never lets a queue secret through; its exact name does", () => {
    assert.deepStrictEqual(providerEnvironment(environment, { strip: [], pass: ["P*"] }), { PATH: "/bin" })
    assert.deepStrictEqual(providerEnvironment(environment, { strip: [], pass: ["P*", "pghost"] }), {
      PATH: "/bin",
      PGHOST: "h"
    })
  })

  it("strip wins over pass", () =>
    assert.deepStrictEqual(providerEnvironment(environment, { strip: ["PATH"], pass: ["PATH", "AWS_KEY"] }), {
      AWS_KEY: "a"
    }))
})
