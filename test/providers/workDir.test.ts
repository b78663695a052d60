/**
 * A payload's `work_dir` (src/providers/workDir.ts), on real directories: refused without
 * `--allow-work-dir`, refused when relative, missing, not a directory, or outside every allowed
 * root once symbolic links are resolved (`..`, a link out of a root); accepted under a root that
 * is itself a link; and pinned, so that a directory replaced between its check and the spawn is
 * refused instead of followed.
 */
import { FileSystem } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { isInside, taskDirectory } from "../../src/providers/workDir.js"
import { tempDir } from "../support/stores.js"

/** A root with an allowed tree, a directory outside it, and links between them. */
const tree = Effect.gen(function* () {
  const dir = fs.realpathSync(yield* tempDir)
  const allowed = path.join(dir, "projects")
  const repo = path.join(allowed, "repo")
  const outside = path.join(dir, "outside")
  for (const made of [repo, outside]) fs.mkdirSync(made, { recursive: true })
  fs.writeFileSync(path.join(allowed, "notes.txt"), "")
  fs.symlinkSync(outside, path.join(allowed, "escape"))
  fs.symlinkSync(allowed, path.join(dir, "linked-projects"))
  return { dir, allowed, repo, outside }
})

const directoryFor = (
  allowedWorkDirs: ReadonlyArray<string>,
  requested: string | undefined,
  workDir?: string
) =>
  Effect.flatMap(FileSystem.FileSystem, (files) =>
    Effect.either(taskDirectory(files, "claude", { workDir, allowedWorkDirs }, requested))
  )

const refusal = <A, E extends { readonly message: string }>(result: Either.Either<A, E>): string =>
  Either.match(result, { onLeft: (error) => error.message, onRight: () => "accepted" })

describe("a payload's work_dir", () => {
  it("isInside compares whole path segments", () => {
    assert.isTrue(isInside("/a/b", "/a/b"))
    assert.isTrue(isInside("/a/b/c", "/a/b"))
    assert.isFalse(isInside("/a/bc", "/a/b"), "a sibling sharing a prefix is outside")
    assert.isTrue(isInside("/x", "/"))
  })

  it.scoped("is refused without --allow-work-dir, and the worker's --work-dir is used for the rest", () =>
    Effect.gen(function* () {
      const t = yield* tree
      assert.match(
        refusal(yield* directoryFor([], t.repo)),
        /^payload for claude: work_dir: this worker runs every task in its own --work-dir/
      )
      const own = yield* directoryFor([], undefined, t.outside)
      assert.deepStrictEqual(Either.getOrUndefined(own), { cwd: t.outside, path: t.outside })
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("inside an allowed root it is pinned: the CLI starts in the directory's descriptor", () =>
    Effect.gen(function* () {
      const t = yield* tree
      const found = yield* directoryFor([t.allowed], t.repo)
      const dir = Either.getOrThrowWith(found, (error) => new Error(error.message))
      assert.strictEqual(dir.path, t.repo)
      assert.match(dir.cwd, /^\/proc\/self\/fd\/\d+$/)
      assert.strictEqual(fs.realpathSync(dir.cwd), t.repo, "the descriptor is the directory checked")
      // The root itself is allowed, and so is a path that reaches it through `..` inside it.
      assert.isTrue(Either.isRight(yield* directoryFor([t.allowed], t.allowed)))
      assert.isTrue(Either.isRight(yield* directoryFor([t.allowed], path.join(t.repo, "..", "repo"))))
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("`..`, a link out of the root, a relative path, a file and a missing path are refused", () =>
    Effect.gen(function* () {
      const t = yield* tree
      const outsideMessage =
        /^payload for claude: work_dir: is not inside a directory this worker allows \(--allow-work-dir\)$/
      assert.match(
        refusal(yield* directoryFor([t.allowed], path.join(t.allowed, "..", "outside"))),
        outsideMessage
      )
      assert.match(refusal(yield* directoryFor([t.allowed], path.join(t.allowed, "escape"))), outsideMessage)
      assert.match(refusal(yield* directoryFor([t.allowed], t.dir)), outsideMessage)
      assert.strictEqual(
        refusal(yield* directoryFor([t.allowed], "projects/repo")),
        "payload for claude: work_dir: must be an absolute path"
      )
      assert.strictEqual(
        refusal(yield* directoryFor([t.allowed], path.join(t.allowed, "notes.txt"))),
        "payload for claude: work_dir: is not a directory"
      )
      assert.strictEqual(
        refusal(yield* directoryFor([t.allowed], path.join(t.allowed, "gone"))),
        "payload for claude: work_dir: does not exist"
      )
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped("a root that is itself a link allows what lies under its target, by either path", () =>
    Effect.gen(function* () {
      const t = yield* tree
      const linked = path.join(t.dir, "linked-projects")
      for (const requested of [path.join(linked, "repo"), t.repo]) {
        const found = yield* directoryFor([linked], requested)
        assert.strictEqual(Either.getOrUndefined(found)?.path, t.repo, requested)
      }
      assert.match(refusal(yield* directoryFor([linked], t.outside)), /is not inside/)
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped(
    "a directory replaced by a link out of the root between its check and its opening is refused",
    () =>
      Effect.gen(function* () {
        const t = yield* tree
        const files = yield* FileSystem.FileSystem
        // The swap happens as the directory is opened: after realPath and stat judged it.
        const swapping: FileSystem.FileSystem = {
          ...files,
          open: (target, options) =>
            Effect.zipRight(
              Effect.sync(() => {
                fs.renameSync(t.repo, path.join(t.allowed, "moved-away"))
                fs.symlinkSync(t.outside, t.repo)
              }),
              files.open(target, options)
            )
        }
        const found = yield* Effect.either(
          taskDirectory(swapping, "claude", { workDir: undefined, allowedWorkDirs: [t.allowed] }, t.repo)
        )
        assert.strictEqual(
          refusal(found),
          "payload for claude: work_dir: was replaced while it was checked; it is no longer a directory inside an allowed one"
        )
      }).pipe(Effect.provide(nodeContextLayer))
  )
})
