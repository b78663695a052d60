/**
 * RelayKeep's FileSystem (src/platform/nodeFiles.ts) makes short calls synchronously; it must
 * answer exactly as @effect/platform-node's does: the same values, and the same error reasons
 * (NotFound, AlreadyExists…) that the stores branch on. The same script runs on both, in
 * directories of their own, and the two transcripts must agree line for line.
 */
import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as NodeFiles from "../../src/platform/nodeFiles.js"

const text = (value: string) => new TextEncoder().encode(value)
const decoded = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

/** Every step's outcome, as a line: its value, or the reason it failed. */
const transcript = (fs: FileSystem.FileSystem, dir: string) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const step = <A>(name: string, effect: Effect.Effect<A, unknown>, show: (a: A) => string = String) =>
      Effect.flatMap(Effect.either(effect), (outcome) =>
        Effect.sync(() => {
          if (outcome._tag === "Right") lines.push(`${name}: ${show(outcome.right)}`)
          else {
            const error = outcome.left
            const reason =
              typeof error === "object" && error !== null && "reason" in error ? String(error.reason) : "?"
            lines.push(`${name}: failed (${reason})`)
          }
        })
      )
    const at = (name: string) => join(dir, name)
    yield* step("writeFile wx", fs.writeFile(at("a"), text("alpha\n"), { flag: "wx", mode: 0o600 }))
    yield* step("writeFile wx again", fs.writeFile(at("a"), text("other\n"), { flag: "wx" }))
    yield* step(
      "mode",
      Effect.sync(() => (statSync(at("a")).mode & 0o777).toString(8))
    )
    yield* step("readFile", fs.readFile(at("a")), decoded)
    yield* step("readFile missing", fs.readFile(at("missing")), decoded)
    yield* step("readFile a directory", fs.readFile(dir), decoded)
    yield* step("link", fs.link(at("a"), at("b")))
    yield* step("link onto an existing name", fs.link(at("a"), at("b")))
    yield* step("link from a missing file", fs.link(at("missing"), at("c")))
    yield* step("rename", fs.rename(at("b"), at("c")))
    yield* step("rename a missing file", fs.rename(at("b"), at("d")))
    yield* step("access", fs.access(at("c")))
    yield* step("access missing", fs.access(at("b")))
    yield* step("exists", fs.exists(at("c")))
    yield* step("exists missing", fs.exists(at("b")))
    yield* step("stat file", fs.stat(at("c")), (info) => `${info.type} ${info.size}`)
    yield* step("stat directory", fs.stat(dir), (info) => info.type)
    yield* step("stat missing", fs.stat(at("b")), (info) => info.type)
    yield* step("readLink of a file", fs.readLink(at("c")))
    yield* step("symlink", fs.symlink(at("c"), at("l")))
    yield* step("readLink", fs.readLink(at("l")), (target) => target.slice(dir.length))
    yield* step("remove", fs.remove(at("c")))
    yield* step("remove missing", fs.remove(at("c")))
    yield* step("makeDirectory", fs.makeDirectory(at("sub")))
    yield* step("remove a directory", fs.remove(at("sub")))
    yield* step("remove a directory, recursive", fs.remove(at("sub"), { recursive: true }))
    yield* step(
      "an open file: write, writeAll, seek, read, readAlloc, stat, truncate, sync",
      Effect.scoped(
        Effect.gen(function* () {
          const file = yield* fs.open(at("f"), { flag: "wx+", mode: 0o600 })
          const first = yield* file.write(text("0123"))
          yield* file.writeAll(text("456789"))
          yield* file.seek(2, "start")
          const buffer = new Uint8Array(3)
          const read = yield* file.read(buffer)
          yield* file.seek(1, "current")
          const rest = yield* file.readAlloc(16)
          const end = yield* file.readAlloc(16)
          const size = (yield* file.stat).size
          yield* file.truncate(4)
          yield* file.sync
          return [
            String(first),
            String(read),
            decoded(buffer),
            Option.match(rest, { onNone: () => "none", onSome: decoded }),
            Option.isNone(end) ? "end" : "more",
            String(size)
          ].join(" ")
        })
      )
    )
    yield* step("after truncate", fs.readFile(at("f")), decoded)
    yield* step(
      "open wx on an existing file",
      Effect.scoped(fs.open(at("f"), { flag: "wx" })),
      () => "opened"
    )
    yield* step("open missing for reading", Effect.scoped(fs.open(at("none"), { flag: "r" })), () => "opened")
    yield* step(
      "append",
      Effect.scoped(
        Effect.gen(function* () {
          const file = yield* fs.open(at("f"), { flag: "a" })
          yield* file.write(text("ab"))
          yield* file.writeAll(text("cd"))
        })
      )
    )
    yield* step("after append", fs.readFile(at("f")), decoded)
    yield* step(
      "fsync a directory",
      Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (handle) => handle.sync))
    )
    // Past the size read on the calling thread: read on the thread pool, whole all the same.
    const big = new Uint8Array(NodeFiles.SmallFileBytes + 4096).map((_, i) => i % 251)
    yield* step("writeFile big", fs.writeFile(at("big"), big))
    yield* step("readFile big", fs.readFile(at("big")), (bytes) =>
      String(bytes.length === big.length && bytes.every((byte, i) => byte === big[i]))
    )
    yield* step(
      "writeAll of nothing",
      Effect.scoped(
        Effect.flatMap(fs.open(at("empty"), { flag: "w" }), (file) => file.writeAll(new Uint8Array(0)))
      )
    )
    yield* step("readDirectory", fs.readDirectory(dir), (names) => [...names].sort().join(","))
    // A kernel file says it is empty and is not: its content is read all the same (the boot id).
    yield* step("readFile of /proc", fs.readFile("/proc/sys/kernel/random/boot_id"), (bytes) =>
      String(/^[0-9a-f-]{36}\n$/.test(decoded(bytes)))
    )
    yield* step("readFile empty", fs.readFile(at("empty")), (bytes) => String(bytes.length))
    return lines
  })

const inFreshDir = <A, E>(run: (dir: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "relaykeep-files-"))),
    run,
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

describe("RelayKeep's FileSystem", () => {
  it.effect("answers as @effect/platform-node's does, value for value and error for error", () =>
    Effect.gen(function* () {
      const platform = yield* FileSystem.FileSystem.pipe(Effect.provide(NodeFileSystem.layer))
      const ours = yield* FileSystem.FileSystem.pipe(Effect.provide(NodeFiles.layer))
      const expected = yield* inFreshDir((dir) => transcript(platform, dir))
      const actual = yield* inFreshDir((dir) => transcript(ours, dir))
      assert.deepStrictEqual(actual, expected)
      // The script is worth comparing: it met the errors the stores branch on.
      for (const reason of ["NotFound", "AlreadyExists"])
        assert.isTrue(
          expected.some((line) => line.includes(`(${reason})`)),
          reason
        )
      assert.include(expected, "after append: 0123abcd")
      assert.include(expected, "readFile of /proc: true")
    })
  )
})
