/** The one line a failed command prints: a library message about a value names the flag. */
import { assert, describe, it } from "@effect/vitest"
import { withFlag } from "../../src/cli/main.js"

describe("withFlag", () => {
  it("puts the flag that was given the quoted value in front", () => {
    assert.strictEqual(
      withFlag("'abc' is not a integer", ["list", "--limit", "abc"]),
      "--limit: 'abc' is not a integer"
    )
    assert.strictEqual(
      withFlag("'abc' is not a integer", ["list", "--limit=abc"]),
      "--limit: 'abc' is not a integer"
    )
  })

  it("leaves a message alone that names a flag, quotes nothing, or quotes what no flag was given", () => {
    const args = ["worker", "--lease", "0"]
    assert.strictEqual(
      withFlag("--lease: must be longer than zero", args),
      "--lease: must be longer than zero"
    )
    assert.strictEqual(
      withFlag("Expected one of the following cases: a, b", args),
      "Expected one of the following cases: a, b"
    )
    assert.strictEqual(withFlag("Received unknown argument: 'x'", args), "Received unknown argument: 'x'")
  })
})
