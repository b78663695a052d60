/**
 * Which lock files a taker may break, planted by hand: dead holders are broken, live ones are
 * waited for, and a guard left by a dead breaker never wedges the next one.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Either, Option } from "effect"
import { fileLockAt, listNames, lockJson, readLock, token, writeText } from "../support/locks.js"
import { tempDir } from "../support/stores.js"

/** We are pid 100 on "here"; pid 200 is alive on this host, every other local pid is dead. */
const self = { pid: 100, hostname: "here", bootId: "boot-now", alive: new Set([200]) }
const local = { host: "here", bootId: "boot-now" }
const elsewhere = { host: "there", bootId: "boot-there" }

type Plant = (now: number) => string
const held =
  (
    fields: { readonly pid: number; readonly host: string; readonly bootId: string },
    expiresIn: number,
    t = "a"
  ) =>
  (now: number) =>
    lockJson({ ...fields, token: token(t), expiresInMillis: expiresIn, nowMillis: now })

/** Plant `files` (name → content) in a fresh lock directory, then try the lock for `task-1`. */
const plantAndTake = (files: ReadonlyArray<readonly [string, Plant]>, waitMillis: number) =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const path = yield* Path.Path
    const fs = yield* FileSystem.FileSystem
    const now = yield* Clock.currentTimeMillis
    for (const [name, plant] of files) yield* writeText(path.join(dir, name), plant(now))
    const contents = Effect.forEach(files, ([name]) => {
      const file = path.join(dir, name)
      return Effect.flatMap(fs.exists(file), (exists) =>
        exists ? Effect.asSome(fs.readFileString(file)) : Effect.succeedNone
      )
    })
    const before = yield* contents
    const lock = yield* fileLockAt(dir, self)
    const taken = yield* Effect.either(
      lock.withLock("task-1", readLock(path.join(dir, "task-1")), { waitMillis })
    )
    const after = yield* contents
    return { taken, before, after, left: yield* listNames(dir) }
  })

const assertBroken = (outcome: Effect.Effect.Success<ReturnType<typeof plantAndTake>>) => {
  const taken = outcome.taken
  assert.isTrue(Either.isRight(taken), `the stale lock was not broken: ${String(taken)}`)
  if (Either.isLeft(taken)) return
  assert.isTrue(Option.isSome(taken.right))
  if (Option.isSome(taken.right)) {
    assert.strictEqual(taken.right.value.pid, 100, "the lock file is ours while we hold it")
    assert.notStrictEqual(taken.right.value.token, token("a"))
  }
  assert.deepStrictEqual(outcome.left, [], "no lock, guard or temp file is left")
}

const stale: ReadonlyArray<readonly [string, Plant]> = [
  ["its pid is dead on this host", held({ pid: 300, ...local }, 30_000)],
  [
    "it is from an earlier boot of this host, though its pid lives",
    held({ pid: 200, ...local, bootId: "old" }, 30_000)
  ],
  ["it expired, on another host", held({ pid: 200, ...elsewhere }, -1_000)],
  ["it expired, on this host, though its pid lives", held({ pid: 200, ...local }, -1_000)],
  ["it is not JSON", () => "{not a lock"],
  ["it is empty", () => ""],
  ["it is JSON of another shape", () => JSON.stringify({ token: 5, pid: "x" })]
]

const live: ReadonlyArray<readonly [string, Plant]> = [
  ["a live holder on another host that has not expired", held({ pid: 300, ...elsewhere }, 30_000)],
  ["a live holder on this host that has not expired", held({ pid: 200, ...local }, 30_000)]
]

const guardOf = (name: string, t: string) => `${name}.break-${token(t)}`

describe("file lock: breaking stale locks", () => {
  for (const [why, plant] of stale) {
    it.scopedLive(`a lock is broken when ${why}`, () =>
      Effect.map(plantAndTake([["task-1", plant]], 1_000), assertBroken).pipe(
        Effect.provide(nodeContextLayer)
      )
    )
  }

  for (const [who, plant] of live) {
    it.scopedLive(`the lock of ${who} is not broken: LockTimeout, file untouched`, () =>
      Effect.gen(function* () {
        const outcome = yield* plantAndTake([["task-1", plant]], 200)
        assert.isTrue(Either.isLeft(outcome.taken) && outcome.taken.left._tag === "LockTimeout")
        assert.deepStrictEqual(outcome.after, outcome.before)
        assert.deepStrictEqual(outcome.left, ["task-1"])
      }).pipe(Effect.provide(nodeContextLayer))
    )
  }

  it.scopedLive("a guard left by a dead breaker does not wedge the next breaker", () =>
    Effect.gen(function* () {
      const outcome = yield* plantAndTake(
        [
          ["task-1", held({ pid: 300, ...local }, 30_000)],
          [guardOf("task-1", "a"), held({ pid: 301, ...local }, 10_000, "c")]
        ],
        1_000
      )
      assertBroken(outcome)
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scopedLive("a dead breaker's guard, whose own guard a dead breaker left too, is broken", () =>
    Effect.gen(function* () {
      const outcome = yield* plantAndTake(
        [
          ["task-1", held({ pid: 300, ...local }, 30_000)],
          [guardOf("task-1", "a"), held({ pid: 301, ...local }, 10_000, "c")],
          [guardOf(guardOf("task-1", "a"), "c"), held({ pid: 302, ...local }, 10_000, "d")]
        ],
        1_000
      )
      assertBroken(outcome)
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scopedLive("a guard held by a live breaker on this host is not broken, however old", () =>
    Effect.gen(function* () {
      const guard = guardOf("task-1", "a")
      const outcome = yield* plantAndTake(
        [
          ["task-1", held({ pid: 300, ...local }, 30_000)],
          [guard, held({ pid: 200, ...local }, -60_000, "c")]
        ],
        200
      )
      assert.isTrue(Either.isLeft(outcome.taken) && outcome.taken.left._tag === "LockTimeout")
      assert.deepStrictEqual(outcome.after, outcome.before)
      assert.deepStrictEqual(outcome.left, [guard, "task-1"].sort())
    }).pipe(Effect.provide(nodeContextLayer))
  )
})
