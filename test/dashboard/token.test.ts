import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { ensureToken, isToken, TokenFileName } from "../../src/dashboard/token.js"
import { Host } from "../../src/services/Host.js"

const Live = Layer.merge(NodeContext.layer, Host.layerTest({}))

describe("dashboard token", () => {
  it.scoped("is created once, 0600, 64 hex characters, and read back after", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = path.join(yield* fs.makeTempDirectoryScoped(), "new-root")
      // Many starts at once agree on one token: the file is linked into place only if absent.
      const tokens = yield* Effect.all(
        Array.from({ length: 8 }, () => ensureToken(root)),
        { concurrency: "unbounded" }
      )
      const [first] = tokens
      assert.match(first ?? "", /^[0-9a-f]{64}$/)
      assert.deepStrictEqual(new Set(tokens).size, 1)
      const file = path.join(root, TokenFileName)
      const info = yield* fs.stat(file)
      assert.strictEqual(info.mode & 0o777, 0o600)
      assert.strictEqual((yield* fs.readFileString(file)).trim(), first)
      assert.strictEqual(yield* ensureToken(root), first)
      // No temp file is left beside it.
      assert.deepStrictEqual(yield* fs.readDirectory(root), [TokenFileName])
    }).pipe(Effect.provide(Live))
  )

  it.scoped("a damaged token file is reported, never overwritten", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* fs.makeTempDirectoryScoped()
      const file = path.join(root, TokenFileName)
      yield* fs.writeFileString(file, "not-a-token\n")
      const error = yield* Effect.flip(ensureToken(root))
      assert.strictEqual(error._tag, "InvalidRecord")
      assert.strictEqual(yield* fs.readFileString(file), "not-a-token\n")
    }).pipe(Effect.provide(Live))
  )

  it("compares whole tokens only", () => {
    const token = "a".repeat(64)
    assert.isTrue(isToken(token, token))
    assert.isFalse(isToken(token, "a".repeat(63)))
    assert.isFalse(isToken(token, `${token}a`))
    assert.isFalse(isToken(token, "b".repeat(64)))
    assert.isFalse(isToken(token, ""))
  })
})
