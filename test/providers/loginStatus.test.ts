/** The part of Codex's config.toml the doctor reads, and what it makes of a login status. */
import { assert, describe, it } from "@effect/vitest"
import { readCodexLogin, readCodexProviderConfig } from "../../src/providers/loginStatus.js"

const config = `
# Codex settings
model = "gpt-5-codex"
model_provider = "local" # ours

[model_providers.local]
name = "Local"
base_url = "http://127.0.0.1:8080/v1"
env_key = 'LOCAL_KEY'

[model_providers."other"]
requires_openai_auth = true

[projects."/home/me/notes"]
trust_level = "trusted"

[projects."/home/me/untrusted"]
trust_level = "untrusted"
`

describe("Codex's config.toml, as the doctor reads it", () => {
  it("the chosen provider's table, comments and quoting aside, and the trusted projects", () => {
    assert.deepStrictEqual(readCodexProviderConfig(config), {
      name: "local",
      baseUrl: "http://127.0.0.1:8080/v1",
      envKey: "LOCAL_KEY",
      requiresOpenAiAuth: false,
      trustedProjects: ["/home/me/notes"]
    })
  })

  it("a quoted table name is the same table; a key outside it does not leak in", () => {
    const other = readCodexProviderConfig(
      config.replace('model_provider = "local"', 'model_provider = "other"')
    )
    assert.deepStrictEqual(
      [other.name, other.requiresOpenAiAuth, other.baseUrl, other.envKey],
      ["other", true, undefined, undefined]
    )
  })

  it("no file, or no model_provider: OpenAI's own, which needs a login", () => {
    const none = readCodexProviderConfig("")
    assert.isUndefined(none.name)
    assert.deepStrictEqual(readCodexLogin({ exitCode: 1, stderr: "Not logged in\n" }, none, {}), {
      ok: false,
      detail: "not logged in: run `codex login` as the worker's user"
    })
    assert.isFalse(
      readCodexLogin({ exitCode: 1, stderr: "" }, readCodexProviderConfig('model_provider = "openai"'), {}).ok
    )
  })

  it("a status command that fails some other way is named by its exit code", () => {
    assert.deepStrictEqual(
      readCodexLogin(
        { exitCode: 2, stderr: "error: unrecognized subcommand" },
        readCodexProviderConfig(""),
        {}
      ),
      {
        ok: false,
        detail: "`codex login status` exited with code 2: run `codex login` as the worker's user"
      }
    )
  })
})
