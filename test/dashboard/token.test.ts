import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { freshToken, isToken, keepToken, startToken, TokenFileName } from "../../src/dashboard/token.js"
import { Host } from "../../src/services/Host.js"

const Live = Layer.merge(nodeContextLayer, Host.layerTest({}))

/** The token file's content, its mode, and what else the root holds beside it. */
const inspect = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const file = path.join(root, TokenFileName)
    return {
      text: (yield* fs.readFileString(file)).trim(),
      mode: (yield* fs.stat(file)).mode & 0o777,
      entries: yield* fs.readDirectory(root)
    }
  })

/** Run `effect` under umask 0, so that a mode the code does not set explicitly would show. */
const underUmask0 = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => process.umask(0)),
    () => effect,
    (previous) => Effect.sync(() => process.umask(previous))
  )

describe("dashboard token", () => {
  it.scoped("each start without --keep-token draws a new one and replaces the file, 0600", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = path.join(yield* fs.makeTempDirectoryScoped(), "new-root")
      const first = yield* underUmask0(freshToken(root))
      assert.match(first, /^[0-9a-f]{64}$/)
      assert.deepStrictEqual(yield* inspect(root), { text: first, mode: 0o600, entries: [TokenFileName] })
      // A file the user loosened is replaced by one of mode 0600, not written through.
      yield* fs.chmod(path.join(root, TokenFileName), 0o644)
      const second = yield* underUmask0(startToken(root, { keep: false }))
      assert.notStrictEqual(second, first)
      assert.isFalse(isToken(second, first), "the old token is not this start's")
      assert.deepStrictEqual(yield* inspect(root), { text: second, mode: 0o600, entries: [TokenFileName] })
    }).pipe(Effect.provide(Live))
  )

  it.scoped("a damaged token file is replaced by a fresh start", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* fs.makeTempDirectoryScoped()
      yield* fs.writeFileString(path.join(root, TokenFileName), "not-a-token\n")
      const token = yield* freshToken(root)
      assert.deepStrictEqual(yield* inspect(root), { text: token, mode: 0o600, entries: [TokenFileName] })
    }).pipe(Effect.provide(Live))
  )

  it.scoped("--keep-token reuses the file's token, and creates it once when there is none", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = path.join(yield* fs.makeTempDirectoryScoped(), "new-root")
      // Many starts at once agree on one token: the file is linked into place only if absent.
      const tokens = yield* underUmask0(
        Effect.all(
          Array.from({ length: 8 }, () => keepToken(root)),
          { concurrency: "unbounded" }
        )
      )
      const [first] = tokens
      assert.match(first ?? "", /^[0-9a-f]{64}$/)
      assert.deepStrictEqual(new Set(tokens).size, 1)
      assert.deepStrictEqual(yield* inspect(root), {
        text: first ?? "",
        mode: 0o600,
        entries: [TokenFileName]
      })
      assert.strictEqual(yield* startToken(root, { keep: true }), first)
      // After a fresh start, --keep-token keeps that start's token.
      const fresh = yield* freshToken(root)
      assert.strictEqual(yield* startToken(root, { keep: true }), fresh)
    }).pipe(Effect.provide(Live))
  )

  it.scoped("--keep-token reports a damaged token file, never overwriting it", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* fs.makeTempDirectoryScoped()
      const file = path.join(root, TokenFileName)
      yield* fs.writeFileString(file, "not-a-token\n")
      const error = yield* Effect.flip(keepToken(root))
      assert.strictEqual(error._tag, "InvalidRecord")
      assert.include(error.message, "without --keep-token")
      assert.notInclude(error.message, "not-a-token")
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

  it.scoped("a root others can write is refused before any token is read or written, its mode kept", () =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = path.join(yield* fs.makeTempDirectoryScoped(), "root")
      yield* startToken(root, { keep: false })
      yield* fs.chmod(root, 0o777)
      for (const keep of [false, true]) {
        const error = yield* Effect.flip(startToken(root, { keep }))
        assert.include(error.message, `chmod 700 ${root}`)
      }
      assert.strictEqual((yield* fs.stat(root)).mode & 0o777, 0o777)
    }).pipe(Effect.provide(Live))
  )
})
