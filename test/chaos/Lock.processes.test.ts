/**
 * The breaking race, with real processes: many processes meet one stale lock at once and then
 * hammer it through the built library. A lock that lets two breakers both "win" shows up as a
 * second holder inside the critical section, or as a lost or extra line in the shared counter.
 * In the "holders die" scenarios every section ends with the holder's lock replaced by a dead
 * process's, so every hand-over is a fresh breaking race (a naive "read, judge stale, unlink"
 * breaker fails these within a run). Needs `npm run build` first: the processes import dist/.
 */
import { Command, FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Array as Arr, Clock, Effect, Fiber, Layer, Schema, Stream } from "effect"
import { fileURLToPath } from "node:url"
import { Host } from "../../src/services/Host.js"
import { Lock } from "../../src/services/Lock.js"
import { fileLockLayer } from "../../src/store/file/FileLock.js"
import { lockJson, token, writeText } from "../support/locks.js"
import { buildService } from "../support/stores.js"

const hammer = fileURLToPath(new URL("../../fixtures/lock-hammer.mjs", import.meta.url))
const builtLock = fileURLToPath(new URL("../../dist/store/file/FileLock.js", import.meta.url))
const Processes = 8
const Iterations = 25
const TestTimeoutMillis = 180_000

interface Scenario {
  /** Plant, beside the stale lock, the guard a dead breaker of it would have left. */
  readonly staleGuard: boolean
  /** Every holder "dies" at the end of its section, leaving a stale lock (and guard) behind. */
  readonly holdersDie: boolean
}

const Report = Schema.parseJson(
  Schema.Struct({ pid: Schema.Int, entries: Schema.Int, violations: Schema.Int })
)

const runHammer = (lockDir: string, workDir: string, dieArgs: ReadonlyArray<string>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const args = [hammer, lockDir, workDir, "task-1", String(Iterations), ...dieArgs]
      const command = Command.make(process.execPath, ...args)
      const child = yield* Command.start(command.pipe(Command.stderr("inherit")))
      const [stdout, code] = yield* Effect.all(
        [Stream.mkString(Stream.decodeText(child.stdout)), child.exitCode],
        { concurrency: 2 }
      )
      return { stdout, code: Number(code) }
    })
  )

/** The pid of a process that has exited: a holder that died holding the lock. */
const deadPid = Effect.scoped(
  Effect.gen(function* () {
    const child = yield* Command.start(Command.make(process.execPath, "-e", "0"))
    yield* child.exitCode
    return Number(child.pid)
  })
)

/** Bounded: at most 1,600 × 25 ms, inside the hammers' own 60 s wait for the go signal. */
const awaitFiles = (dir: string, prefix: string, count: number) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    for (let attempt = 0; attempt < 1_600; attempt++) {
      const names = yield* fs.readDirectory(dir)
      if (names.filter((name) => name.startsWith(prefix)).length >= count) return true
      yield* Effect.sleep("25 millis")
    }
    return false
  })

const breakingRace = (scenario: Scenario) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const host = yield* Host
    assert.isTrue(yield* fs.exists(builtLock), "run `npm run build` first: the hammers import dist/")
    const root = yield* fs.makeTempDirectoryScoped()
    const lockDir = path.join(root, "locks")
    const workDir = path.join(root, "work")
    yield* fs.makeDirectory(lockDir)
    yield* fs.makeDirectory(workDir)

    const dead = yield* deadPid
    assert.isFalse(yield* host.isAlive(dead), `pid ${dead} has exited`)
    const now = yield* Clock.currentTimeMillis
    const planted = { pid: dead, host: host.hostname, bootId: host.bootId, nowMillis: now }
    yield* writeText(
      path.join(lockDir, "task-1"),
      lockJson({ ...planted, token: token("a"), expiresInMillis: 30_000 })
    )
    if (scenario.staleGuard) {
      const guard = path.join(lockDir, `task-1.break-${token("a")}`)
      yield* writeText(guard, lockJson({ ...planted, token: token("c"), expiresInMillis: 10_000 }))
    }

    const dieArgs = scenario.holdersDie ? [String(dead), ...(scenario.staleGuard ? ["guard"] : [])] : []
    const runs = yield* Effect.forkScoped(
      Effect.forEach(Arr.range(1, Processes), () => runHammer(lockDir, workDir, dieArgs), {
        concurrency: "unbounded"
      })
    )
    assert.isTrue(yield* awaitFiles(workDir, "ready-", Processes), "every hammer started")
    yield* fs.writeFileString(path.join(workDir, "go"), "")
    const results = yield* Fiber.join(runs)

    assert.deepStrictEqual(
      results.map((result) => result.code),
      Arr.replicate(0, Processes),
      "every process exits 0"
    )
    const reports = yield* Effect.forEach(results, (result) => Schema.decode(Report)(result.stdout.trim()))
    const secondHolders = reports.reduce((sum, report) => sum + report.violations, 0)
    assert.strictEqual(
      secondHolders,
      0,
      `entries that met a second holder inside: ${JSON.stringify(reports)}`
    )
    assert.deepStrictEqual(
      reports.map((report) => report.entries),
      Arr.replicate(Iterations, Processes),
      "each process entered its count of times"
    )
    const lines = (yield* fs.readFileString(path.join(workDir, "counter")))
      .split("\n")
      .filter((l) => l !== "")
    assert.strictEqual(lines.length, Processes * Iterations, "one counter line per entry, none lost")
    for (const report of reports) {
      assert.strictEqual(lines.filter((line) => line === String(report.pid)).length, Iterations)
    }
    assert.isFalse(yield* fs.exists(path.join(workDir, "inside")))

    // Whatever the last holder left (a dead one's lock and guard, when holders die) is broken
    // by the next taker, and then nothing at all is left.
    const lock = yield* buildService(
      Lock,
      fileLockLayer(lockDir).pipe(Layer.provide(Layer.succeed(Host, host)), Layer.provide(nodeContextLayer))
    )
    yield* lock.withLock("task-1", Effect.void, { waitMillis: 5_000 })
    assert.deepStrictEqual(yield* fs.readDirectory(lockDir), [], "no lock, guard or temp file is left")
  }).pipe(Effect.provide(Layer.provideMerge(Host.layer, nodeContextLayer)))

describe("file lock across processes", () => {
  it.scopedLive(
    `${Processes} processes break one stale lock at once, then hammer it: one holder at a time`,
    () => breakingRace({ staleGuard: false, holdersDie: false }),
    TestTimeoutMillis
  )

  it.scopedLive(
    `${Processes} processes break one stale lock whose guard a dead breaker left too`,
    () => breakingRace({ staleGuard: true, holdersDie: false }),
    TestTimeoutMillis
  )

  it.scopedLive(
    `${Processes} processes, every holder dying with the lock: each hand-over is a breaking race`,
    () => breakingRace({ staleGuard: false, holdersDie: true }),
    TestTimeoutMillis
  )

  it.scopedLive(
    `${Processes} processes, every holder dying with the lock and a breaker's guard beside it`,
    () => breakingRace({ staleGuard: true, holdersDie: true }),
    TestTimeoutMillis
  )
})
