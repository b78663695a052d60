/** The part of Codex's config.toml the doctor reads, and what it makes of a login status. */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import type { CodexProviderConfig } from "../../src/providers/loginStatus.js"
import { NoCodexConfig, readCodexLogin, readCodexProviderConfig } from "../../src/providers/loginStatus.js"

const config = `
# Codex settings
model = "gpt-5-codex"
model_provider = "local" # ours

[model_providers.local] # mine
name = "Local"
base_url = "http://127.0.0.1:8080/v1"
env_key = 'LOCAL_KEY'

[model_providers."other"]
requires_openai_auth = true

[projects.'/home/me/notes']
trust_level = "trusted"

[projects."/home/me/untrusted"]
trust_level = "untrusted"
`

const read = (toml: string): CodexProviderConfig =>
  Either.getOrElse(readCodexProviderConfig(toml), (reason) => assert.fail(reason))

describe("Codex's config.toml, as the doctor reads it", () => {
  it("the chosen provider's table, comments and quoting aside, and the trusted projects", () => {
    assert.deepStrictEqual(read(config), {
      name: "local",
      baseUrl: "http://127.0.0.1:8080/v1",
      envKey: "LOCAL_KEY",
      requiresOpenAiAuth: false,
      trustedProjects: ["/home/me/notes"]
    })
  })

  it("a quoted table name is the same table; a key of another table does not leak in", () => {
    const other = read(config.replace('model_provider = "local"', 'model_provider = "other"'))
    assert.deepStrictEqual(
      [other.name, other.requiresOpenAiAuth, other.baseUrl, other.envKey],
      ["other", true, undefined, undefined]
    )
  })

  it("dotted keys are read like tables, and a top-level profile chooses the provider", () => {
    const dotted = read(
      [
        'profile = "work"',
        'model_provider = "openai"',
        'model_providers.gateway.base_url = "http://127.0.0.1:9000/v1"',
        "[profiles.work]",
        'model_provider = "gateway"'
      ].join("\n")
    )
    assert.deepStrictEqual([dotted.name, dotted.baseUrl], ["gateway", "http://127.0.0.1:9000/v1"])
  })

  it("a file that does not parse, or has a wrong type, is an error naming where, never quoting it", () => {
    const broken = readCodexProviderConfig(
      'model_provider = "local"\n[model_providers.local\nkey = "sk-secret"'
    )
    assert.isTrue(Either.isLeft(broken))
    assert.match(
      Either.isLeft(broken) ? broken.left : "",
      /^config\.toml does not parse \(line \d+, column \d+\)$/
    )
    const wrong = readCodexProviderConfig("model_provider = 5")
    assert.isTrue(Either.isLeft(wrong))
    assert.match(Either.isLeft(wrong) ? wrong.left : "", /^config\.toml: model_provider: /)
  })

  it("no model_provider: OpenAI's own, which needs a login", () => {
    assert.deepStrictEqual(read(""), NoCodexConfig)
    assert.deepStrictEqual(readCodexLogin({ exitCode: 1, stderr: "Not logged in\n" }, NoCodexConfig, {}), {
      ok: false,
      detail: "not logged in: run `codex login` as the worker's user"
    })
    assert.isFalse(readCodexLogin({ exitCode: 1, stderr: "" }, read('model_provider = "openai"'), {}).ok)
  })

  it("a provider's key variable is needed even when Codex is logged in", () => {
    const local = read(config)
    assert.deepStrictEqual(readCodexLogin({ exitCode: 0, stderr: "" }, local, {}), {
      ok: false,
      detail:
        "model provider local takes its key from LOCAL_KEY, which the worker's environment does not have (or --strip-env removes)"
    })
    assert.isTrue(readCodexLogin({ exitCode: 0, stderr: "" }, local, { LOCAL_KEY: "k" }).ok)
  })

  it("a status command that fails some other way is named by its exit code", () => {
    assert.deepStrictEqual(
      readCodexLogin({ exitCode: 2, stderr: "error: unrecognized subcommand" }, NoCodexConfig, {}),
      {
        ok: false,
        detail: "`codex login status` exited with code 2: run `codex login` as the worker's user"
      }
    )
  })
})
