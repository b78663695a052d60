/**
 * Replays what the real CLIs printed (fixtures/cli/, recorded by scripts/record-cli-fixtures.ts
 * from the versions pinned in fixtures/agent-clis.json) through the judges the worker uses. A
 * release that changes its output shows up here as a failed replay after re-recording, not as
 * lost work in someone's queue.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { claudeArgs, judgeClaude } from "../../src/providers/claude.js"
import { codexArgs, judgeCodex, readCodexEvents } from "../../src/providers/codex.js"
import { NoCodexConfig, readClaudeAuthStatus, readCodexLogin } from "../../src/providers/loginStatus.js"
import type { CliVerdict } from "../../src/providers/verdict.js"
import { claudeVersion, codexVersion } from "../support/agentClis.js"
import { answer } from "../support/modelApis.js"

const folder = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "fixtures", "cli")

const Fixture = Schema.Struct({
  cli: Schema.Literal("claude", "codex", "status"),
  version: Schema.String,
  situation: Schema.String,
  args: Schema.Array(Schema.String),
  exit_code: Schema.NullOr(Schema.Int),
  requests: Schema.Int,
  stdout: Schema.String,
  stderr: Schema.String
})
type Fixture = typeof Fixture.Type
const decode = Schema.decodeUnknownSync(Schema.parseJson(Fixture), { onExcessProperty: "error" })

const load = (cli: string): ReadonlyMap<string, Fixture> =>
  new Map(
    fs
      .readdirSync(path.join(folder, cli))
      .filter((name) => name.endsWith(".json"))
      .map((name) => [
        name.replace(/\.json$/, ""),
        decode(fs.readFileSync(path.join(folder, cli, name), "utf8"))
      ])
  )

/** What each recorded situation must come to. */
type Expected =
  | { readonly answered: true; readonly events: number | "some" }
  | { readonly answered: false; readonly retryable: boolean; readonly reason: RegExp }

const claudeExpected: Record<string, Expected> = {
  success: { answered: true, events: 0 },
  dropped_stream: { answered: true, events: 0 },
  connection_lost: {
    answered: false,
    retryable: true,
    reason: /^could not reach the API \(API Error: Connection dropped \(ECONNRESET\)/
  },
  overloaded_529: {
    answered: false,
    retryable: true,
    reason: /^the API failed \(529 overloaded_error: API Error: 529/
  },
  rate_limited_429: { answered: false, retryable: true, reason: /^the API failed \(429 rate_limit_error: / },
  invalid_api_key_401: {
    answered: false,
    retryable: false,
    reason:
      /^the API refused its credentials \(401 authentication_error: Invalid API key.*log in with `claude`/
  },
  not_logged_in: {
    answered: false,
    retryable: false,
    reason: /^not logged in: run `claude` and log in as the worker's user$/
  },
  unknown_model_404: {
    answered: false,
    retryable: false,
    reason: /^the API refused the request \(404 not_found_error: There's an issue with the selected model/
  },
  stopped_while_streaming: {
    answered: false,
    retryable: true,
    reason: /^exited with code 143 without a result$/
  }
}

const codexExpected: Record<string, Expected> = {
  success: { answered: true, events: "some" },
  reconnect_then_success: { answered: true, events: "some" },
  dropped_stream: { answered: true, events: "some" },
  connection_lost: {
    answered: false,
    retryable: true,
    reason: /^the model API failed \(stream disconnected before completion/
  },
  overloaded_500: {
    answered: false,
    retryable: true,
    reason: /^the model API failed \(We’re currently experiencing high demand/
  },
  rate_limited_429: {
    answered: false,
    retryable: true,
    reason: /^the model API failed \(exceeded retry limit, last status: 429/
  },
  invalid_api_key_401: {
    answered: false,
    retryable: false,
    reason: /^could not authenticate \(unexpected status 401.*`codex login`/
  },
  unknown_model_404: {
    answered: false,
    retryable: false,
    reason: /^the model was refused \(The model stand-in-model does not exist\)/
  },
  outside_git_repository: {
    answered: false,
    retryable: false,
    reason:
      /^refuses to run outside a git repository, and the work dir \/work is not in one: run `git init` there, or start the worker with --codex-skip-git-check/
  },
  missing_key_variable: {
    answered: false,
    retryable: false,
    reason: /^its model provider needs the environment variable STAND_IN_API_KEY: set it/
  }
}

/** Ended by a signal (a task timeout): never judged, only read for its receipt; see below. */
const codexStopped = "stopped_while_streaming"

const check = (name: string, verdict: CliVerdict, expected: Expected | undefined) => {
  assert.isDefined(expected, `an expectation for the recorded situation ${name}`)
  if (expected === undefined) return
  if (expected.answered) {
    assert.strictEqual(
      verdict._tag,
      "Answered",
      `${name}: ${verdict._tag === "Failed" ? verdict.reason : ""}`
    )
    if (verdict._tag !== "Answered") return
    assert.strictEqual(verdict.text, answer)
    if (expected.events === "some")
      assert.isAbove(verdict.events.length, 0, `${name}: the CLI's notices are kept`)
    else assert.strictEqual(verdict.events.length, expected.events)
    return
  }
  assert.strictEqual(verdict._tag, "Failed", name)
  if (verdict._tag !== "Failed") return
  assert.match(verdict.reason, expected.reason, name)
  assert.strictEqual(verdict.retryable, expected.retryable, `${name} retryable`)
  assert.notInclude(verdict.reason, "(success)")
}

describe("the real CLIs' recorded output, replayed through the judges", () => {
  const claude = load("claude")
  const codex = load("codex")

  it("every situation was recorded with the pinned versions and today's flags", () => {
    assert.sameMembers([...claude.keys()], Object.keys(claudeExpected))
    assert.sameMembers([...codex.keys()], [...Object.keys(codexExpected), codexStopped])
    for (const fixture of claude.values()) {
      assert.strictEqual(fixture.version, claudeVersion)
      assert.deepStrictEqual(fixture.args, claudeArgs("claude-sonnet-4-5"))
    }
    for (const fixture of codex.values()) {
      assert.strictEqual(fixture.version, codexVersion)
      assert.deepStrictEqual(fixture.args, codexArgs({ skipGitCheck: false })("stand-in-model"))
    }
  })

  for (const [name, fixture] of claude) {
    it(`claude ${name}`, () =>
      check(
        name,
        judgeClaude({ exitCode: fixture.exit_code ?? -1, stdout: fixture.stdout, stderr: fixture.stderr }),
        claudeExpected[name]
      ))
  }

  for (const [name, fixture] of [...codex].filter(([name]) => name !== codexStopped)) {
    it(`codex ${name}`, () =>
      check(
        name,
        judgeCodex(
          { exitCode: fixture.exit_code ?? -1, stdout: fixture.stdout, stderr: fixture.stderr },
          "/work"
        ),
        codexExpected[name]
      ))
  }

  it("codex stopped mid-turn: the events so far read as an unfinished turn, the notices kept", () => {
    const fixture = codex.get(codexStopped)
    assert.isDefined(fixture)
    if (fixture === undefined) return
    assert.isNull(fixture.exit_code, "ended by the signal")
    const reading = readCodexEvents(fixture.stdout)
    assert.strictEqual(reading.turn._tag, "none")
    assert.isUndefined(reading.message)
    assert.strictEqual(reading.malformed, 0)
  })

  it("codex: a reconnect notice is kept as an event, never taken for the outcome", () => {
    const fixture = codex.get("reconnect_then_success")
    assert.isDefined(fixture)
    if (fixture === undefined) return
    const verdict = judgeCodex(
      { exitCode: fixture.exit_code ?? -1, stdout: fixture.stdout, stderr: fixture.stderr },
      "/work"
    )
    assert.deepInclude(
      verdict.events.map((event) => event.type),
      "error"
    )
    assert.isTrue(verdict.events.some((event) => /^Reconnecting\.\.\. 1\//.test(event.message)))
  })

  describe("the login status the doctor reads", () => {
    const status = load("status")
    const get = (name: string) => {
      const fixture = status.get(name)
      assert.isDefined(fixture, `fixtures/cli/status/${name}.json`)
      return {
        exitCode: fixture?.exit_code ?? -1,
        stdout: fixture?.stdout ?? "",
        stderr: fixture?.stderr ?? ""
      }
    }
    const openAi = NoCodexConfig

    it("recorded for both CLIs, logged out and with an API key", () =>
      assert.sameMembers(
        [...status.keys()],
        ["claude_logged_out", "claude_api_key", "codex_logged_out", "codex_api_key"]
      ))

    it("claude auth status: logged out is not ready, saying how to log in; an API key is", () => {
      assert.deepStrictEqual(readClaudeAuthStatus(get("claude_logged_out")), {
        ok: false,
        detail: "not logged in: run `claude` and log in as the worker's user"
      })
      assert.deepStrictEqual(readClaudeAuthStatus(get("claude_api_key")), {
        ok: true,
        detail: "logged in (api_key from ANTHROPIC_API_KEY)"
      })
    })

    it("codex login status: logged out is not ready for OpenAI's provider; a stored key is, and is never repeated", () => {
      assert.deepStrictEqual(readCodexLogin(get("codex_logged_out"), openAi, {}), {
        ok: false,
        detail: "not logged in: run `codex login` as the worker's user"
      })
      const ready = readCodexLogin(get("codex_api_key"), openAi, {})
      assert.isTrue(ready.ok)
      assert.notInclude(ready.detail, "sk-")
    })
  })
})
