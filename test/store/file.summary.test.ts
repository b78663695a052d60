/**
 * The file store's summary index (src/store/file/summaryIndex.ts), checked against the records
 * themselves: every `list` page and every `counts` must equal what `pageOf` makes of every
 * record on disk (read with `scanRecords`, not through the index). Real files, real fsync; the
 * index tuned tiny so that segments split, tails compact and journals rotate within a few tasks.
 *
 * `check` rebuilds the index, so no test calls it before comparing, except where the rebuild
 * is what it tests.
 */
import { FileSystem, Path } from "@effect/platform"
import { SystemError } from "@effect/platform/Error"
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Data, Deferred, Effect, Either, Fiber, Layer, Option } from "effect"
import { spawn } from "node:child_process"
import * as nodeFs from "node:fs"
import { join } from "node:path"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import type { JsonObject, Lease, TaskState, TaskSummary } from "../../src/domain/Task.js"
import { TaskStates } from "../../src/domain/Task.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Host } from "../../src/services/Host.js"
import type { ListRequest, TaskPage, TaskStoreShape } from "../../src/services/TaskStore.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { Lock } from "../../src/services/Lock.js"
import { fileLockLayer } from "../../src/store/file/FileLock.js"
import { layoutOf } from "../../src/store/file/layout.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { scanRecords } from "../../src/store/file/scan.js"
import type { SummaryIndexTuning } from "../../src/store/file/summaryIndex.js"
import { makeSummaryIndex } from "../../src/store/file/summaryIndex.js"
import { encodeEntry } from "../../src/store/file/summaryFormat.js"
import { emptyStateCounts, pageOf } from "../../src/store/shared.js"
import { spawnEnv } from "../support/environment.js"
import type { HostOptions } from "../support/stores.js"
import { buildService, faultyFileStoreAt, tempDir } from "../support/stores.js"
import { None } from "../support/FaultyFileSystem.js"

/** Small enough that a handful of tasks split segments, compact tails and rotate journals. */
const Tiny: SummaryIndexTuning = {
  segmentEntries: 3,
  compactAtEntries: 5,
  compactAtJournals: 2,
  journalRotateBytes: 600
}

/**
 * Tiny, except that nothing compacts on its own: no compaction forked by a writer's append runs
 * while a test damages the index by hand. Such tests fold the tail with `compactNow`.
 */
const Quiet: SummaryIndexTuning = { ...Tiny, compactAtEntries: 100_000, compactAtJournals: 100_000 }

/** The pids of the test's store instances, each alive to all the others. */
const Pids = { a: 4242, b: 4243, reader: 4244 } as const
const everyoneAlive = new Set<number>(Object.values(Pids))
const hostOf = (pid: number, bootId = "test-boot"): HostOptions => ({ pid, bootId, alive: everyoneAlive })

const id = (text: string) => ClientRequestId.make(text)

/** A store, and how many times it has read a record file (the records answer, not the index). */
type Instance = TaskStoreShape & { readonly recordReads: () => number }

/** The file system `base` (the real one by default), counting reads of `tasks/<id>.json`. */
const countingRecordReads = (counter: { reads: number }, base: Layer.Layer<FileSystem.FileSystem>) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) => ({
      ...fs,
      readFile: (path: string) =>
        Effect.zipRight(
          Effect.sync(() => {
            if (/\/tasks\/[0-9a-f]{64}\.json$/.test(path)) counter.reads += 1
          }),
          fs.readFile(path)
        )
    }))
  ).pipe(Layer.provide(base))

/** A file store over `root` with the given tuning, on the real file system or on `fileSystem`. */
const storeAt = (
  root: string,
  host: HostOptions | "real",
  options: {
    readonly tuning?: Partial<SummaryIndexTuning>
    readonly fileSystem?: Layer.Layer<FileSystem.FileSystem>
  } = {}
): Effect.Effect<Instance, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const counter = { reads: 0 }
    const fileSystem = countingRecordReads(counter, options.fileSystem ?? nodeContextLayer)
    const store = yield* buildService(
      TaskStore,
      fileTaskStoreLayer({ root, summaryIndex: options.tuning ?? Tiny }).pipe(
        Layer.provide(host === "real" ? Host.layer : Host.layerTest(host)),
        Layer.provide(Layer.merge(nodeContextLayer, fileSystem))
      )
    )
    return { ...store, recordReads: () => counter.reads }
  })

/**
 * Fold the tail now, as a store of `host` would (summaryIndex.ts `compact`, which the TaskStore
 * port does not offer): under the root's index lock, with its own Lock over `<root>/locks`.
 * The root must have been opened by a store already (its secret is read).
 */
const compactNow = (root: string, host: HostOptions | "real") =>
  Effect.scoped(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const hostLayer =
        host === "real" ? Host.layer.pipe(Layer.provide(nodeContextLayer)) : Host.layerTest(host)
      const hostService = yield* buildService(Host, hostLayer)
      const lock = yield* buildService(
        Lock,
        fileLockLayer(join(root, "locks")).pipe(Layer.provide(hostLayer), Layer.provide(nodeContextLayer))
      )
      const layout = layoutOf(path, path.resolve(root))
      const secret = new Uint8Array(nodeFs.readFileSync(join(root, "secret")))
      const index = yield* makeSummaryIndex({
        fs,
        path,
        host: hostService,
        lock,
        layout,
        scan: scanRecords(fs, path, layout, secret),
        tuning: Tiny
      })
      yield* index.compact
    })
  ).pipe(Effect.provide(nodeContextLayer))

// ---------------------------------------------------------------------------------------------
// The oracle: every record on disk, read without the index.

const onDisk = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const secret = new Uint8Array(nodeFs.readFileSync(join(root, "secret")))
    const scan = yield* scanRecords(fs, path, layoutOf(path, path.resolve(root)), secret)
    assert.deepStrictEqual(scan.invalid, [], "no record is damaged")
    return scan
  }).pipe(Effect.provide(nodeContextLayer))

const countsOf = (records: ReadonlyArray<{ readonly state: TaskState }>): Record<TaskState, number> => {
  const states = emptyStateCounts()
  for (const record of records) states[record.state] += 1
  return states
}

/** Every page of a listing, following `next_cursor` to the end. */
const allPages = <E>(list: (request: ListRequest) => Effect.Effect<TaskPage, E>, request: ListRequest) =>
  Effect.gen(function* () {
    const pages: Array<TaskPage> = []
    let cursor: string | undefined = undefined
    for (let n = 0; n < 1_000; n++) {
      const page: TaskPage = yield* list({ ...request, cursor })
      pages.push(page)
      if (page.next_cursor === null) return pages
      cursor = page.next_cursor
    }
    return assert.fail(`${JSON.stringify(request)}: more than 1,000 pages`)
  })

/** The listings every check compares: each filter, at each page size. */
const filtersFor = (taskIds: ReadonlyArray<string>): ReadonlyArray<ListRequest> => {
  const fragment = taskIds[0]?.slice(20, 26)
  return [
    {},
    ...TaskStates.map((state) => ({ state })),
    { provider: "fake-echo" },
    { provider: "claude" },
    { provider: "nobody" },
    { search: "JOB-1" },
    { search: "zürich" },
    { search: '"hi"' },
    ...(fragment === undefined ? [] : [{ search: fragment }]),
    { state: "queued", provider: "claude" }
  ]
}
const Limits: ReadonlyArray<number | undefined> = [1, 2, 7, undefined]

/**
 * `list` (every filter, page size and page) and `counts` of `store` equal the records'; and,
 * unless `fromRecords` allows it, they were answered from the index: no record was read.
 */
const assertAgrees = (
  store: Instance,
  root: string,
  label: string,
  limits = Limits,
  fromRecords: "never" | "allowed" = "never"
) =>
  Effect.gen(function* () {
    const { records } = yield* onDisk(root)
    const expectedCounts = countsOf(records)
    const readsBefore = store.recordReads()
    assert.deepStrictEqual(yield* store.counts, expectedCounts, `${label}: counts`)
    for (const filter of filtersFor(records.map((record) => record.task_id).sort()))
      for (const limit of limits) {
        const request: ListRequest = { ...filter, limit }
        const expected = yield* allPages((r) => pageOf(records, r), request)
        const actual = yield* allPages(store.list, request)
        assert.deepStrictEqual(actual, expected, `${label}: list ${JSON.stringify(request)}`)
      }
    // Asked again after every listing (which may have compacted or rebuilt the index).
    assert.deepStrictEqual(yield* store.counts, expectedCounts, `${label}: counts after listing`)
    if (fromRecords === "never")
      assert.strictEqual(store.recordReads() - readsBefore, 0, `${label}: answered from the index`)
  })

// ---------------------------------------------------------------------------------------------
// The index on disk.

const summaryDir = (root: string) => join(root, "index", "summary")
const journalDir = (root: string) => join(root, "index", "journal")
const manifestPath = (root: string) => join(summaryDir(root), "manifest.json")
const staleFlag = (root: string) => join(summaryDir(root), "stale")

interface ManifestOnDisk {
  readonly covers: Readonly<Record<string, number>>
  readonly segments: ReadonlyArray<{ readonly file: string; readonly count: number }>
}

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The manifest as the test reads it (a few fields, checked by hand), or undefined. */
const readManifest = (root: string): ManifestOnDisk | undefined => {
  if (!nodeFs.existsSync(manifestPath(root))) return undefined
  const json: unknown = JSON.parse(nodeFs.readFileSync(manifestPath(root), "utf8"))
  if (!isRecord(json) || !isRecord(json["covers"]) || !Array.isArray(json["segments"])) return undefined
  const covers: Record<string, number> = {}
  for (const [name, offset] of Object.entries(json["covers"]))
    if (typeof offset === "number") covers[name] = offset
  const segments: Array<{ file: string; count: number }> = []
  for (const segment of json["segments"]) {
    const info: unknown = segment
    if (isRecord(info) && typeof info["file"] === "string" && typeof info["count"] === "number")
      segments.push({ file: info["file"], count: info["count"] })
  }
  return { covers, segments }
}

const manifestOf = (root: string): ManifestOnDisk =>
  readManifest(root) ?? assert.fail(`${manifestPath(root)}: no manifest`)

const segmentNames = (root: string) => manifestOf(root).segments.map((segment) => segment.file)

const journalNames = (root: string): ReadonlyArray<string> =>
  nodeFs.existsSync(journalDir(root)) && nodeFs.statSync(journalDir(root)).isDirectory()
    ? nodeFs
        .readdirSync(journalDir(root))
        .filter((name) => name.endsWith(".jsonl"))
        .sort()
    : []

/** The index was built anew: a valid manifest naming none of `before`'s segments, and no stale flag. */
const assertRebuilt = (root: string, before: ReadonlyArray<string>, label: string) => {
  const after = segmentNames(root)
  for (const file of after) {
    assert.notInclude(before, file, `${label}: a segment of the old index survived a rebuild`)
    assert.isTrue(nodeFs.existsSync(join(summaryDir(root), file)), `${label}: ${file} exists`)
  }
  assert.isFalse(nodeFs.existsSync(staleFlag(root)), `${label}: the stale flag is gone`)
}

/** A journal line as summaryIndex.ts writes it, for a task as the test wants it seen. */
/** A journal line for `summary` at `revision`, in state `state`, as a writer appends it. */
const journalLine = (summary: TaskSummary, revision: number, state: TaskState) =>
  `${encodeEntry({ ...summary, revision, state })}\n`

const revisionOnDisk = (root: string, taskId: string): unknown => {
  const json: unknown = JSON.parse(nodeFs.readFileSync(join(root, "tasks", `${taskId}.json`), "utf8"))
  return isRecord(json) ? json["revision"] : undefined
}

// ---------------------------------------------------------------------------------------------
// Random operations.

/** A small LCG (Numerical Recipes), so that a failing seed replays exactly. */
const lcg = (seed: number) => {
  let state = seed >>> 0
  return (n: number): number => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0
    // The high bits: an LCG's low bits repeat with short periods.
    return (state >>> 16) % n
  }
}

const payloadFor = (n: number): JsonObject => {
  switch (n % 4) {
    case 0:
      return { n }
    case 1:
      return { n, provider: "claude" }
    case 2:
      return { n, provider: "codex" }
    default:
      // Not a string: listed as the echo's, and shown with no provider.
      return { n, provider: 7 }
  }
}

const requestIdFor = (n: number): string =>
  n % 5 === 0 ? `Zürich-${n}` : n % 7 === 0 ? `say "hi" ${n}` : `Job-${n}`

interface Known {
  readonly taskId: TaskId
  readonly sha: string
  readonly n: number
  lease: Lease | undefined
}

const Retry = { max_attempts: 3, backoff_initial_ms: 0, backoff_max_ms: 0 }

/** The errors a random operation may meet on a task it guessed about: anything else fails the test. */
const tolerated = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.catchIf(
    Effect.asVoid(effect),
    (error) => error._tag === "StaleAttempt" || error._tag === "UnknownTask",
    () => Effect.void
  )

/** One random operation on one of `stores`. */
const randomStep = (
  stores: ReadonlyArray<TaskStoreShape>,
  known: Array<Known>,
  next: (n: number) => number,
  counter: { n: number }
) =>
  Effect.gen(function* () {
    const store = stores[next(stores.length)] ?? assert.fail("no store")
    const roll = next(100)
    const task = known.length === 0 ? undefined : known[next(known.length)]
    const held = known.filter((k) => k.lease !== undefined)
    const holder = held.length === 0 ? undefined : held[next(held.length)]
    if (roll < 30 || task === undefined) {
      const n = counter.n++
      const receipt = yield* store.submit({ clientRequestId: id(requestIdFor(n)), payload: payloadFor(n) })
      known.push({ taskId: receipt.task_id, sha: receipt.payload_sha256, n, lease: undefined })
      return
    }
    if (roll < 33) {
      // A client's retry: the same receipt, no write.
      yield* store.submit({ clientRequestId: id(requestIdFor(task.n)), payload: payloadFor(task.n) })
      return
    }
    if (roll < 45) {
      const claimed = yield* store.claim(task.taskId, { workerId: "w", leaseMillis: 60_000, retry: Retry })
      if (Option.isSome(claimed)) task.lease = claimed.value.lease
      return
    }
    if (roll < 52) {
      const batch = yield* store.claimNext({
        workerId: "w",
        leaseMillis: 60_000,
        retry: Retry,
        limit: 1 + next(3)
      })
      for (const claimed of batch.claimed) {
        const mine = known.find((k) => k.taskId === claimed.record.task_id)
        if (mine !== undefined) mine.lease = claimed.lease
      }
      return
    }
    if (roll < 60) {
      yield* tolerated(store.cancel(task.taskId, task.sha))
      return
    }
    if (holder === undefined || holder.lease === undefined) return
    const lease = holder.lease
    const taskId = holder.taskId
    if (roll < 72) {
      yield* tolerated(store.complete(taskId, lease, { done: holder.n }))
      holder.lease = undefined
    } else if (roll < 77) {
      yield* tolerated(store.fail(taskId, lease, { tag: "Boom", message: "scripted" }))
      holder.lease = undefined
    } else if (roll < 83) {
      yield* tolerated(store.fail(taskId, lease, { tag: "Flaky", message: "again", retryable: true }))
      holder.lease = undefined
    } else if (roll < 88) {
      yield* tolerated(store.heartbeat(taskId, lease, 60_000))
    } else if (roll < 92) {
      yield* tolerated(store.release(taskId, lease))
      holder.lease = undefined
    } else if (roll < 95) {
      yield* tolerated(store.reap(taskId, lease, "owner_dead"))
      holder.lease = undefined
    } else if (roll < 98) {
      yield* tolerated(store.stopCancelled(taskId, lease))
      holder.lease = undefined
    } else {
      yield* tolerated(store.recordProcess(taskId, lease, 99_999))
    }
  })

/** A few submits and transitions on `store`, enough to compact and split with Tiny. */
const someWork = (store: TaskStoreShape, prefix: string, count: number) =>
  Effect.gen(function* () {
    const receipts = []
    for (let i = 0; i < count; i++) {
      const receipt = yield* store.submit({
        clientRequestId: id(`${prefix}-${i}`),
        payload: payloadFor(i)
      })
      receipts.push(receipt)
      if (i % 3 === 0) {
        const claimed = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
        if (Option.isSome(claimed) && i % 2 === 0)
          yield* store.complete(receipt.task_id, claimed.value.lease, { i })
      }
      if (i % 5 === 1) yield* store.cancel(receipt.task_id, receipt.payload_sha256)
    }
    return receipts
  })

// ---------------------------------------------------------------------------------------------

describe("summary index: random operations on two writers", () => {
  for (const seed of [1, 20_261_204]) {
    it.scopedLive(
      `seed ${seed}: list and counts of both writers and a fresh reader equal the records`,
      () =>
        Effect.gen(function* () {
          const root = yield* tempDir
          const a = yield* storeAt(root, hostOf(Pids.a))
          const b = yield* storeAt(root, hostOf(Pids.b))
          const next = lcg(seed)
          const known: Array<Known> = []
          const counter = { n: 0 }
          let maxSegments = 0
          let maxSeq = 0
          let compacted = false
          for (let step = 1; step <= 200; step++) {
            yield* randomStep([a, b], known, next, counter)
            for (const name of journalNames(root)) maxSeq = Math.max(maxSeq, Number(name.slice(-12, -6)))
            if (step % 10 !== 0) continue
            // Writer a every ten steps with every page size; writer b and a fresh instance (its
            // own view of the same files) every twenty with some, to keep the runtime down.
            yield* assertAgrees(a, root, `seed ${seed} step ${step} writer a`)
            if (step % 20 !== 0) continue
            yield* assertAgrees(b, root, `seed ${seed} step ${step} writer b`, [2, undefined])
            yield* Effect.scoped(
              Effect.flatMap(storeAt(root, hostOf(Pids.reader)), (reader) =>
                assertAgrees(reader, root, `seed ${seed} step ${step} fresh reader`, [7, undefined])
              )
            )
            const manifest = manifestOf(root)
            maxSegments = Math.max(maxSegments, manifest.segments.length)
            compacted ||= Object.values(manifest.covers).some((offset) => offset > 0)
          }
          // The run reached what the tuning is for: else the comparisons proved little.
          assert.isAbove(maxSegments, 2, "segments split")
          assert.isTrue(compacted, "journals were folded into the snapshot")
          assert.isAbove(maxSeq, 1, "journals rotated")
          assert.isAbove(known.length, 40)
        }),
      60_000
    )
  }
})

/** A store that never compacts by itself, with a snapshot folded (several segments) and a tail. */
const quietStoreWithWork = (root: string, prefix: string, count: number) =>
  Effect.gen(function* () {
    const store = yield* storeAt(root, hostOf(Pids.a), { tuning: Quiet })
    const receipts = yield* someWork(store, prefix, count)
    yield* compactNow(root, hostOf(Pids.a))
    const manifest = manifestOf(root)
    assert.isAbove(manifest.segments.length, 1, "the snapshot has split")
    assert.isTrue(
      Object.values(manifest.covers).some((offset) => offset > 0),
      "the journals were folded"
    )
    yield* someWork(store, `${prefix}-tail`, 3)
    return { store, receipts }
  })

describe("summary index: damage is repaired from the records", () => {
  it.scopedLive("a missing, corrupt or stale manifest, or a garbage journal line, is rebuilt", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store } = yield* quietStoreWithWork(root, "damage", 14)
      yield* assertAgrees(store, root, "before any damage", [7])

      // The manifest removed.
      let before = segmentNames(root)
      nodeFs.rmSync(manifestPath(root))
      const readsBefore = store.recordReads()
      yield* store.list({})
      assert.isAbove(store.recordReads(), readsBefore, "a rebuild reads the records (so the count counts)")
      // The first call meets the damage and rebuilds from the records; every later one reads the index.
      assert.deepStrictEqual(
        yield* store.counts,
        countsOf((yield* onDisk(root)).records),
        "manifest removed: counts"
      )
      yield* assertAgrees(store, root, "manifest removed", [7])
      assertRebuilt(root, before, "manifest removed")

      // The manifest corrupt.
      yield* someWork(store, "corrupt-manifest", 3)
      before = segmentNames(root)
      nodeFs.writeFileSync(manifestPath(root), '{"version":1,"covers":{},"segm')
      // The first call meets the damage and rebuilds from the records; every later one reads the index.
      assert.deepStrictEqual(
        yield* store.counts,
        countsOf((yield* onDisk(root)).records),
        "manifest corrupt: counts"
      )
      yield* assertAgrees(store, root, "manifest corrupt", [7])
      assertRebuilt(root, before, "manifest corrupt")

      // The stale flag, as a writer whose journal append failed leaves it.
      yield* someWork(store, "stale", 3)
      before = segmentNames(root)
      nodeFs.writeFileSync(staleFlag(root), "")
      // The first call meets the damage and rebuilds from the records; every later one reads the index.
      assert.deepStrictEqual(
        yield* store.counts,
        countsOf((yield* onDisk(root)).records),
        "stale flag: counts"
      )
      yield* assertAgrees(store, root, "stale flag", [7])
      assertRebuilt(root, before, "stale flag")

      // A garbage line in the writer's journal, after which it goes on appending.
      yield* someWork(store, "garbage", 2)
      const journal = journalNames(root).at(-1) ?? assert.fail("no journal")
      nodeFs.appendFileSync(join(journalDir(root), journal), "not an entry\n")
      const garbageEnd = nodeFs.statSync(join(journalDir(root), journal)).size
      yield* someWork(store, "after-garbage", 1)
      before = segmentNames(root)
      // The first call meets the damage and rebuilds from the records; every later one reads the index.
      assert.deepStrictEqual(
        yield* store.counts,
        countsOf((yield* onDisk(root)).records),
        "garbage journal line: counts"
      )
      yield* assertAgrees(store, root, "garbage journal line", [7])
      assertRebuilt(root, before, "garbage journal line")
      assert.isAtLeast(
        manifestOf(root).covers[journal] ?? 0,
        garbageEnd,
        "the rebuild folded past the garbage"
      )
    })
  )

  it.scopedLive(
    "a corrupt segment line: the list that meets it answers from the records, the next one rebuilds",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const { store } = yield* quietStoreWithWork(root, "segment", 14)
        yield* assertAgrees(store, root, "before any damage", [7])
        const before = segmentNames(root)
        // The oldest segment: no tail entry touches it, so only a listing that reaches it reads it.
        const oldest = before.at(-1) ?? assert.fail("no segment")
        const file = join(summaryDir(root), oldest)
        const lines = nodeFs.readFileSync(file, "utf8").split("\n")
        nodeFs.writeFileSync(file, ["{not an entry", ...lines.slice(1)].join("\n"))
        const { records } = yield* onDisk(root)
        const readsBefore = store.recordReads()
        assert.deepStrictEqual(
          yield* store.list({ limit: 500 }),
          yield* pageOf(records, { limit: 500 }),
          "answered from the records meanwhile"
        )
        assert.strictEqual(store.recordReads() - readsBefore, records.length, "the damage was met")
        yield* assertAgrees(store, root, "after the damage was met", [7])
        assertRebuilt(root, before, "corrupt segment line")
      })
  )

  it.scopedLive("index/summary removed altogether under an open store: list and counts rebuild it", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store } = yield* quietStoreWithWork(root, "gone", 10)
      yield* assertAgrees(store, root, "before", [7])
      nodeFs.rmSync(summaryDir(root), { recursive: true })
      const { records } = yield* onDisk(root)
      const listed = yield* Effect.either(store.list({ limit: 500 }))
      assert.deepStrictEqual(listed, Either.right(yield* pageOf(records, { limit: 500 })), "list answers")
      const counted = yield* Effect.either(store.counts)
      assert.deepStrictEqual(counted, Either.right(countsOf(records)), "counts answers")
      assert.isDefined(readManifest(root), "the manifest exists again")
    })
  )

  it.scopedLive("index/summary removed altogether: a store opened afterwards rebuilds it", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      yield* Effect.scoped(quietStoreWithWork(root, "x", 10))
      nodeFs.rmSync(summaryDir(root), { recursive: true })
      const store = yield* storeAt(root, hostOf(Pids.b))
      yield* assertAgrees(store, root, "fresh store", [7], "allowed")
      assertRebuilt(root, [], "fresh store")
    })
  )
})

describe("summary index: check by a store opened afterwards", () => {
  it.scopedLive("after index/summary is removed, a new store's check recreates the manifest", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      yield* Effect.scoped(quietStoreWithWork(root, "check-fresh", 10))
      nodeFs.rmSync(summaryDir(root), { recursive: true })
      const store = yield* storeAt(root, hostOf(Pids.b), { tuning: Quiet })
      const report = yield* store.check
      assert.deepStrictEqual(report.states, countsOf((yield* onDisk(root)).records))
      assert.isDefined(readManifest(root), "the manifest exists again")
      yield* assertAgrees(store, root, "after check", [7])
    })
  )
})

describe("summary index: revisions settle which entry is current", () => {
  it.scopedLive("a journal entry older than the snapshot's is ignored; a newer one wins", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store, receipts } = yield* quietStoreWithWork(root, "rev", 12)
      // The target: claimed and completed (revisions 0, 1, 2), then folded into the snapshot.
      const target = receipts[0] ?? assert.fail("no receipt")
      assert.strictEqual(revisionOnDisk(root, target.task_id), 2)
      const folded = manifestOf(root)
      const segmentText = folded.segments
        .map((segment) => nodeFs.readFileSync(join(summaryDir(root), segment.file), "utf8"))
        .join("")
      assert.include(
        segmentText,
        `{"revision":2,"task_id":"${target.task_id}"`,
        "the snapshot has revision 2"
      )
      yield* assertAgrees(store, root, "folded", [7])

      const { records } = yield* onDisk(root)
      const record = records.find((r) => r.task_id === target.task_id) ?? assert.fail("no record")
      const summary = (yield* pageOf([record], {})).tasks[0] ?? assert.fail("no summary")
      // A journal of another live writer of this boot, not yet folded: its revision-1 entry
      // (the task running) is older than the snapshot's.
      const hand = join(journalDir(root), `testboot-${Pids.b}-${"c".repeat(32)}-000001.jsonl`)
      nodeFs.writeFileSync(hand, journalLine(summary, 1, "running"))
      yield* assertAgrees(store, root, "older entry in a journal", [7, undefined])
      // Folded too: the snapshot keeps revision 2.
      yield* compactNow(root, hostOf(Pids.a))
      assert.strictEqual(
        manifestOf(root).covers[`testboot-${Pids.b}-${"c".repeat(32)}-000001.jsonl`],
        nodeFs.statSync(hand).size
      )
      yield* assertAgrees(store, root, "older entry folded", [7, undefined])

      // Revision 3, which says the task failed, is newer than anything: it is the current entry.
      nodeFs.appendFileSync(hand, journalLine(summary, 3, "failed"))
      const expected = countsOf(records)
      const shifted = { ...expected, complete: expected.complete - 1, failed: expected.failed + 1 }
      const newerWins = (label: string) =>
        Effect.gen(function* () {
          const listed = yield* store.list({ limit: 500 })
          assert.strictEqual(
            listed.tasks.find((task) => task.task_id === target.task_id)?.state,
            "failed",
            `${label}: the newer entry wins`
          )
          assert.deepStrictEqual(yield* store.counts, shifted, `${label}: counts`)
          const failed = yield* store.list({ state: "failed", limit: 500 })
          assert.include(
            failed.tasks.map((task) => task.task_id),
            target.task_id,
            `${label}: failed lists it`
          )
          const complete = yield* store.list({ state: "complete", limit: 500 })
          assert.notInclude(
            complete.tasks.map((task) => task.task_id),
            target.task_id,
            `${label}: the snapshot's entry is outdated`
          )
        })
      yield* newerWins("in the tail")
      yield* compactNow(root, hostOf(Pids.a))
      yield* newerWins("folded")
    })
  )
})

describe("summary index: check", () => {
  it.scopedLive("check rebuilds the index: after index/summary is removed, the manifest is back", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store } = yield* quietStoreWithWork(root, "check", 10)
      nodeFs.rmSync(summaryDir(root), { recursive: true })
      const report = yield* Effect.either(store.check)
      const { records } = yield* onDisk(root)
      assert.isTrue(Either.isRight(report), `check answers: ${JSON.stringify(report)}`)
      if (Either.isRight(report)) assert.deepStrictEqual(report.right.states, countsOf(records))
      assert.isDefined(readManifest(root), "the manifest exists again")
      yield* assertAgrees(store, root, "after check", [7])
    })
  )

  it.scopedLive("check rebuilds an index that is wrong without looking damaged", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { store } = yield* quietStoreWithWork(root, "check", 10)
      yield* assertAgrees(store, root, "before", [undefined])
      // Every journal lost (not folded): the snapshot is all that is left, and it is behind.
      const late = yield* store.submit({ clientRequestId: id("late"), payload: {} })
      for (const name of journalNames(root)) nodeFs.rmSync(join(journalDir(root), name))
      const before = segmentNames(root)
      const missing = yield* store.list({ limit: 500 })
      assert.notInclude(
        missing.tasks.map((task) => task.task_id),
        late.task_id,
        "the index is behind (or this test proves nothing)"
      )
      const report = yield* store.check
      assert.strictEqual(report.records, 14)
      assertRebuilt(root, before, "check")
      yield* assertAgrees(store, root, "after check", [7])
    })
  )
})

describe("summary index: reboot", () => {
  it.scopedLive("a new boot id rebuilds the index on open and drops the old boot's journals", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const late = yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* storeAt(root, hostOf(Pids.a, "boot-a"), { tuning: Quiet })
          yield* someWork(store, "boot-a", 12)
          yield* compactNow(root, hostOf(Pids.a, "boot-a"))
          yield* someWork(store, "boot-a-tail", 3)
          yield* assertAgrees(store, root, "boot-a", [7])
          // A change the old boot's index lost (its journal, never fsynced, did not survive the
          // crash): only a rebuild from the records shows it.
          const late = yield* store.submit({ clientRequestId: id("late"), payload: {} })
          const journals = journalNames(root)
          assert.isAbove(journals.length, 0)
          nodeFs.truncateSync(join(journalDir(root), journals.at(-1) ?? ""), 0)
          return late
        })
      )
      const before = segmentNames(root)
      assert.isTrue(
        journalNames(root).every((name) => name.startsWith("boota-")),
        "only boot-a's journals so far"
      )
      const store = yield* storeAt(root, hostOf(Pids.a, "boot-b"), { tuning: Quiet })
      const first = yield* store.list({ limit: 500 })
      assert.include(
        first.tasks.map((task) => task.task_id),
        late.task_id,
        "the rebuild on open read the records"
      )
      assertRebuilt(root, before, "reboot")
      assert.deepStrictEqual(
        journalNames(root).filter((name) => name.startsWith("boota-")),
        [],
        "boot-a's journals are gone once folded"
      )
      yield* assertAgrees(store, root, "boot-b", [2, undefined])
      yield* someWork(store, "boot-b", 8)
      yield* compactNow(root, hostOf(Pids.a, "boot-b"))
      yield* assertAgrees(store, root, "boot-b after work", [2, undefined])
      assert.isTrue(journalNames(root).every((name) => name.startsWith("bootb-")))
    })
  )
})

// ---------------------------------------------------------------------------------------------
// Failing journal appends.

/**
 * The real file system, except for journal files: while `mode.now` is "enospc" opening one
 * fails; while it is "tear", a write to one writes half its bytes and fails (a full disk).
 */
const journalFaults = (mode: { now: "ok" | "enospc" | "tear" }) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) => {
      const isJournal = (path: string) => path.includes(`${join("index", "journal")}/`)
      const enospc = (method: string, path: string) =>
        new SystemError({
          module: "FileSystem",
          method,
          reason: "Unknown",
          pathOrDescriptor: path,
          description: "ENOSPC: no space left on device (injected)"
        })
      const wrap = (file: FileSystem.File, path: string): FileSystem.File => ({
        [FileSystem.FileTypeId]: FileSystem.FileTypeId,
        fd: file.fd,
        stat: file.stat,
        seek: (offset, from) => file.seek(offset, from),
        sync: file.sync,
        read: (buffer) => file.read(buffer),
        readAlloc: (size) => file.readAlloc(size),
        truncate: (length) => file.truncate(length),
        write: (buffer) => file.write(buffer),
        writeAll: (buffer) =>
          mode.now === "tear"
            ? Effect.zipRight(
                file.writeAll(buffer.subarray(0, Math.floor(buffer.length / 2))),
                Effect.fail(enospc("writeAll", path))
              )
            : file.writeAll(buffer)
      })
      return {
        ...fs,
        open: (path: string, options?: FileSystem.OpenFileOptions) =>
          isJournal(path) && mode.now === "enospc"
            ? Effect.fail(enospc("open", path))
            : Effect.map(fs.open(path, options), (file) => (isJournal(path) ? wrap(file, path) : file))
      }
    })
  ).pipe(Layer.provide(nodeContextLayer))

describe("summary index: a journal append that fails", () => {
  it.scopedLive("never fails the write; the index is marked stale and the next list rebuilds it", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const mode: { now: "ok" | "enospc" | "tear" } = { now: "ok" }
      const store = yield* storeAt(root, hostOf(Pids.a), { tuning: Quiet, fileSystem: journalFaults(mode) })
      yield* store.check
      mode.now = "enospc"
      const receipt = yield* store.submit({ clientRequestId: id("unjournalled"), payload: {} })
      const claimed = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
      assert.isTrue(Option.isSome(claimed), "the claim is written")
      assert.deepStrictEqual(journalNames(root), [], "no journal could be created")
      assert.isTrue(nodeFs.existsSync(staleFlag(root)), "the index is marked stale")
      mode.now = "ok"
      const before = segmentNames(root)
      const { records } = yield* onDisk(root)
      assert.deepStrictEqual(yield* store.list({}), yield* pageOf(records, {}), "the first list rebuilds")
      yield* assertAgrees(store, root, "after the failed appends", [2, undefined])
      assertRebuilt(root, before, "after the failed appends")
    })
  )

  it.scopedLive("a torn append (half a line, then ENOSPC) loses none of the writer's later entries", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const mode: { now: "ok" | "enospc" | "tear" } = { now: "ok" }
      const store = yield* storeAt(root, hostOf(Pids.a), { tuning: Quiet, fileSystem: journalFaults(mode) })
      const receipt = yield* store.submit({ clientRequestId: id("torn"), payload: {} })
      mode.now = "tear"
      const claimed = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
      const lease = Option.isSome(claimed) ? claimed.value.lease : assert.fail("not claimed")
      mode.now = "ok"
      assert.isTrue(nodeFs.existsSync(staleFlag(root)), "the index is marked stale")
      // A reader rebuilds (the journal's size, torn half included, is now folded)...
      yield* assertAgrees(store, root, "after the torn append", [undefined], "allowed")
      // ...and the writer appends its next entry to the same journal, after the torn half.
      yield* store.complete(receipt.task_id, lease, { ok: true })
      const listed = yield* store.list({})
      assert.strictEqual(listed.tasks[0]?.state, "complete", "the completion is listed")
      yield* assertAgrees(store, root, "after the next append", [undefined])
    })
  )

  it.scopedLive("index/journal replaced by a regular file: writes succeed, list still answers", () =>
    Effect.gen(function* () {
      // Tests run as root here, and root writes into a 0500 directory regardless (CAP_DAC_OVERRIDE),
      // so chmod cannot make the append fail; a regular file where the directory was does
      // (ENOTDIR), for every user.
      const root = yield* tempDir
      const store = yield* storeAt(root, hostOf(Pids.a), { tuning: Quiet })
      yield* store.check
      nodeFs.rmSync(journalDir(root), { recursive: true })
      nodeFs.writeFileSync(journalDir(root), "")
      const receipt = yield* store.submit({ clientRequestId: id("no-journal-dir"), payload: {} })
      const claimed = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
      const lease = Option.isSome(claimed) ? claimed.value.lease : assert.fail("not claimed")
      yield* store.complete(receipt.task_id, lease, { ok: true })
      assert.isTrue(nodeFs.existsSync(staleFlag(root)), "the index is marked stale")
      const { records } = yield* onDisk(root)
      const listed = yield* Effect.either(store.list({}))
      assert.deepStrictEqual(listed, Either.right(yield* pageOf(records, {})), "list answers")
      const counted = yield* Effect.either(store.counts)
      assert.deepStrictEqual(counted, Either.right(countsOf(records)), "counts answers")
    })
  )
})

describe("summary index: concurrency", () => {
  it.scopedLive(
    "writers on two instances and a lister in a loop: every listing is current, the end agrees",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const a = yield* storeAt(root, hostOf(Pids.a))
        const b = yield* storeAt(root, hostOf(Pids.b))
        const reader = yield* storeAt(root, hostOf(Pids.reader))
        yield* Effect.all([a.check, b.check, reader.check])
        /** Acknowledged before a listing began: it must show them, the completed ones as complete. */
        const submitted: Array<TaskId> = []
        const completed: Array<TaskId> = []
        let started = 0
        const writer = (w: number) =>
          Effect.gen(function* () {
            const mine = w % 2 === 0 ? a : b
            const other = w % 2 === 0 ? b : a
            for (let i = 0; i < 8; i++) {
              started += 1
              const receipt = yield* mine.submit({
                clientRequestId: id(`Job-${w}-${i}`),
                payload: payloadFor(w + i)
              })
              submitted.push(receipt.task_id)
              if (i % 3 === 2) continue
              const claimed = yield* other.claim(receipt.task_id, { workerId: `w${w}`, leaseMillis: 60_000 })
              if (Option.isNone(claimed)) continue
              yield* mine.complete(receipt.task_id, claimed.value.lease, { w, i })
              completed.push(receipt.task_id)
            }
          })
        const done = yield* Deferred.make<void>()
        let listings = 0
        const check = (store: TaskStoreShape, label: string) =>
          Effect.gen(function* () {
            const mustShow = [...submitted]
            const mustBeComplete = [...completed]
            const page = yield* store.list({ limit: 500 })
            const counts = yield* store.counts
            const startedBy = started
            listings += 1
            const states = new Map(page.tasks.map((task) => [task.task_id, task.state]))
            assert.strictEqual(states.size, page.tasks.length, `${label}: each task once`)
            for (const taskId of mustShow) assert.isTrue(states.has(taskId), `${label}: ${taskId} listed`)
            for (const taskId of mustBeComplete)
              assert.strictEqual(states.get(taskId), "complete", `${label}: ${taskId} complete`)
            const total = Object.values(counts).reduce((sum, n) => sum + n, 0)
            assert.isAtLeast(total, mustShow.length, `${label}: counts ${JSON.stringify(counts)}`)
            assert.isAtMost(total, startedBy, `${label}: counts ${JSON.stringify(counts)}`)
            assert.isAtLeast(counts.complete, mustBeComplete.length, `${label}: complete counted`)
          })
        let rebuilds = 0
        const lister = Effect.gen(function* () {
          while (!(yield* Deferred.isDone(done))) {
            yield* check(a, "writer a")
            yield* check(b, "writer b")
            yield* check(reader, "reader")
            // Now and then a rebuild (`check`) while the writers append: it takes each journal's
            // size mid-append, which the next readers must read on from.
            if (listings % 9 === 0) {
              yield* reader.check
              rebuilds += 1
            }
          }
        })
        const listing = yield* Effect.fork(lister)
        yield* Effect.forEach([0, 1, 2, 3, 4, 5], writer, { concurrency: "unbounded", discard: true })
        yield* Deferred.succeed(done, undefined)
        yield* Fiber.join(listing)
        assert.isAbove(listings, 3, "the lister ran while the writers wrote")
        assert.isAbove(rebuilds, 0, "and rebuilt the index meanwhile")
        assert.strictEqual(submitted.length, 48)
        yield* assertAgrees(a, root, "writer a at the end", [7, undefined])
        yield* assertAgrees(reader, root, "reader at the end", [7, undefined])
      }),
    60_000
  )
})

/**
 * The real file system, except that the first listing of `index/journal` once `gate.armed` is
 * set waits for `gate.release`: a reader stopped between its read of the manifest and its
 * listing of the journals, as the scheduler may stop any process there.
 */
const pausingJournalListing = (gate: {
  armed: boolean
  readonly reached: Deferred.Deferred<void>
  readonly release: Deferred.Deferred<void>
}) =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (fs) => ({
      ...fs,
      // Decided when run, not when called: the store builds some effects once and runs them often.
      readDirectory: (path: string, options?: FileSystem.ReadDirectoryOptions) =>
        Effect.suspend(() => {
          if (!gate.armed || !path.endsWith(join("index", "journal"))) return fs.readDirectory(path, options)
          gate.armed = false
          return Effect.zipRight(
            Effect.zipRight(Deferred.succeed(gate.reached, undefined), Deferred.await(gate.release)),
            fs.readDirectory(path, options)
          )
        })
    }))
  ).pipe(Layer.provide(nodeContextLayer))

/**
 * A store on the fault-injecting file system, a rehearsed completion (to learn its calls), and
 * a claimed target whose completion a test then breaks at one of those calls.
 */
const rehearsedCompletion = (root: string) =>
  Effect.gen(function* () {
    const { store, plan } = yield* faultyFileStoreAt(root, { pid: 1001, bootId: "test-boot" })
    const claimed = (clientRequestId: string) =>
      Effect.gen(function* () {
        const receipt = yield* store.submit({ clientRequestId: id(clientRequestId), payload: {} })
        const claim = yield* store.claim(receipt.task_id, { workerId: "w", leaseMillis: 60_000 })
        return { receipt, lease: Option.isSome(claim) ? claim.value.lease : assert.fail("not claimed") }
      })
    const rehearsal = yield* claimed("rehearsal")
    yield* plan.arm(None)
    yield* store.complete(rehearsal.receipt.task_id, rehearsal.lease, { ok: true })
    const calls = yield* plan.journal
    // Where the completion renamed its record into place, among its calls that change the disk.
    const renamed = calls.findIndex(
      (entry) =>
        entry.kind === "rename" && entry.path === join(root, "tasks", `${rehearsal.receipt.task_id}.json`)
    )
    assert.isAtLeast(renamed, 0, "a completion renames its record")
    const target = yield* claimed("target")
    const completeTarget = Effect.either(store.complete(target.receipt.task_id, target.lease, { ok: true }))
    /** The target's state as its record has it, and as `list` of `reader` has it. */
    const states = (reader: TaskStoreShape) =>
      Effect.gen(function* () {
        const { records } = yield* onDisk(root)
        const listed = yield* reader.list({ limit: 500 })
        return {
          record: records.find((record) => record.task_id === target.receipt.task_id)?.state,
          listed: listed.tasks.find((task) => task.task_id === target.receipt.task_id)?.state
        }
      })
    return { store, plan, calls, renamed, completeTarget, states }
  })

describe("summary index: a write that fails after its record is in place", () => {
  it.scopedLive(
    "dead between a record's rename and its journal entry: the next process lists the record as written",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const { plan, renamed, completeTarget, states } = yield* rehearsedCompletion(root)
        // The process dies right after the rename (SIGKILL, the OOM killer): nothing after it runs.
        yield* plan.arm({ _tag: "CrashAfter", mutations: renamed + 1 })
        assert.isTrue(Either.isLeft(yield* completeTarget), "the process died before it could answer")
        // The next process of the same boot: no reboot, nothing damaged, nothing marked stale.
        const next = yield* storeAt(root, { pid: 1002, bootId: "test-boot", alive: new Set([1002]) })
        assert.deepStrictEqual(yield* states(next), { record: "complete", listed: "complete" })
        yield* assertAgrees(next, root, "after the death", [undefined], "allowed")
      })
  )

  it.scopedLive(
    "the directory fsync after the rename fails (EIO): the same store lists the record as written",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const { store, plan, calls, renamed, completeTarget, states } = yield* rehearsedCompletion(root)
        // The fsync of tasks/ that makes the rename durable: the first one after it.
        const syncs = calls.slice(0, renamed).filter((entry) => entry.kind === "sync").length
        const fsync = calls.slice(renamed).find((entry) => entry.kind === "sync")
        assert.isDefined(fsync, "a completion fsyncs after its rename")
        yield* plan.arm({ _tag: "Fail", operation: "sync", nth: syncs + 1, errno: "EIO" })
        const outcome = yield* completeTarget
        assert.isTrue(yield* plan.fired)
        assert.isTrue(Either.isLeft(outcome) && outcome.left._tag === "StorageError", "the completion failed")
        yield* plan.arm(None)
        // The record is in place (only its durability is in doubt): the index must not hide it.
        assert.deepStrictEqual(yield* states(store), { record: "complete", listed: "complete" })
      })
  )
})

/**
 * A root whose snapshot does not cover the journals of a process that is gone, and a reader
 * stopped between its read of that snapshot's manifest and its listing of the journals, while a
 * compaction folds those journals into a new manifest and removes them (their writer is dead).
 * Then the reader goes on; `read` is what it was doing.
 */
const acrossACompaction = <A>(read: (reader: TaskStoreShape) => Effect.Effect<A, unknown>) =>
  Effect.gen(function* () {
    const root = yield* tempDir
    const writer = yield* storeAt(root, hostOf(Pids.a), { tuning: Quiet })
    // Seven tasks: the snapshot splits in two (of three and four); the newest part holds no
    // cancelled task.
    yield* someWork(writer, "base", 7)
    yield* compactNow(root, hostOf(Pids.a))
    assert.strictEqual(manifestOf(root).segments.length, 2)
    // Pid 5555, dead to everyone else: a submit, claim and complete; a submit and cancel.
    yield* Effect.scoped(
      Effect.flatMap(storeAt(root, { pid: 5555, bootId: "test-boot" }, { tuning: Quiet }), (gone) =>
        someWork(gone, "gone", 2)
      )
    )
    const goneJournals = () => journalNames(root).filter((name) => name.startsWith("testboot-5555-"))
    assert.isAbove(goneJournals().length, 0)
    const gate = {
      armed: false,
      reached: yield* Deferred.make<void>(),
      release: yield* Deferred.make<void>()
    }
    const reader = yield* storeAt(root, hostOf(Pids.reader), {
      tuning: Quiet,
      fileSystem: pausingJournalListing(gate)
    })
    yield* reader.live
    gate.armed = true
    const reading = yield* Effect.fork(read(reader))
    yield* Deferred.await(gate.reached)
    yield* compactNow(root, hostOf(Pids.a))
    assert.deepStrictEqual(goneJournals(), [], "the compaction removed the gone process's journals")
    yield* Deferred.succeed(gate.release, undefined)
    const answer = yield* Fiber.join(reading)
    return { answer, records: (yield* onDisk(root)).records }
  })

describe("summary index: a reader racing a compaction", () => {
  it.scopedLive("counts read across a compaction that removes a folded journal count its entries", () =>
    Effect.gen(function* () {
      const { answer, records } = yield* acrossACompaction((reader) => reader.counts)
      assert.deepStrictEqual(answer, countsOf(records), "counts as the records have them")
    })
  )

  it.scopedLive(
    "a filtered list read across a compaction that removes a folded journal lists its tasks",
    () =>
      Effect.gen(function* () {
        const request: ListRequest = { state: "cancelled", limit: 50 }
        const { answer, records } = yield* acrossACompaction((reader) => reader.list(request))
        assert.deepStrictEqual(answer, yield* pageOf(records, request), "the page as the records have it")
      })
  )
})

describe("summary index: what a dead process leaves", () => {
  it.scopedLive(
    "a rebuild that died leaves its claim on the stale flag: the next open puts the flag back, the next read rebuilds",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const { store } = yield* quietStoreWithWork(root, "claim", 8)
        yield* assertAgrees(store, root, "before", [7])
        const before = segmentNames(root)
        // What `rebuildFrom` renames the flag to while it works, left by pid 5555, dead to everyone.
        const claim = join(summaryDir(root), `stale-5555-${"ab".repeat(16)}`)
        nodeFs.writeFileSync(claim, "")
        const next = yield* storeAt(root, hostOf(Pids.b), { tuning: Quiet })
        yield* next.list({})
        assert.isFalse(nodeFs.existsSync(claim), "the dead rebuild's claim is gone")
        assert.isAbove(next.recordReads(), 0, "the flag came back, and the read rebuilt from the records")
        assertRebuilt(root, before, "after a dead rebuild's claim")
        yield* assertAgrees(next, root, "after a dead rebuild's claim", [7])
      })
  )

  it.scopedLive(
    "a segment an interrupted compaction left, named by no manifest, goes at the next compaction",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const { store } = yield* quietStoreWithWork(root, "orphan", 8)
        const orphan = join(summaryDir(root), `seg-${"ef".repeat(16)}.jsonl`)
        nodeFs.writeFileSync(orphan, "")
        yield* compactNow(root, hostOf(Pids.a))
        assert.isFalse(nodeFs.existsSync(orphan), "the orphan segment is gone")
        const named = new Set(manifestOf(root).segments.map((info) => info.file))
        assert.deepStrictEqual(
          segmentNames(root).filter((name) => !named.has(name)),
          [],
          "every segment left is one the manifest names"
        )
        yield* assertAgrees(store, root, "after the compaction", [7])
      })
  )

  it.scopedLive(
    "a task lock a dead process left is broken at open, once its record's entry is appended again",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const { store, receipts } = yield* quietStoreWithWork(root, "lock", 8)
        const target = receipts[0] ?? assert.fail("no task")
        // The lock of a process that died between the record's rename and its entry (pid 5555).
        const lockFile = join(root, "locks", target.task_id)
        const now = new Date().toISOString()
        nodeFs.writeFileSync(
          lockFile,
          JSON.stringify({
            owner: "5555@test-host",
            token: "cd".repeat(16),
            pid: 5555,
            host: "test-host",
            boot_id: "test-boot",
            acquired_at: now,
            expires_at: new Date(Date.now() + 30_000).toISOString()
          })
        )
        const journalsBefore = journalNames(root).length
        const next = yield* storeAt(root, hostOf(Pids.b), { tuning: Quiet })
        yield* next.counts
        assert.isFalse(nodeFs.existsSync(lockFile), "the dead holder's lock is broken")
        assert.isAbove(
          journalNames(root).length,
          journalsBefore,
          "the entry was appended again, to a journal of the opener's"
        )
        yield* assertAgrees(next, root, "after the repair", [7])
        yield* assertAgrees(store, root, "the first writer agrees", [7])
        // The next open meets no such lock: it appends nothing.
        const journalsAfter = journalNames(root).length
        const third = yield* storeAt(root, hostOf(Pids.reader), { tuning: Quiet })
        yield* third.counts
        assert.strictEqual(journalNames(root).length, journalsAfter, "no repair the second time")
      })
  )
})

describe("summary index: records written before revisions", () => {
  it.scopedLive("a record without a revision reads as revision 0, and its next write is revision 1", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const receipts = yield* Effect.scoped(
        Effect.flatMap(storeAt(root, hostOf(Pids.a)), (store) => someWork(store, "old", 9))
      )
      // As an older version left the root: records without `revision`, and no summary index.
      for (const name of nodeFs.readdirSync(join(root, "tasks")).filter((n) => n.endsWith(".json"))) {
        const file = join(root, "tasks", name)
        const json: unknown = JSON.parse(nodeFs.readFileSync(file, "utf8"))
        if (!isRecord(json)) return assert.fail(`${file} is not an object`)
        const { revision: _revision, ...old } = json
        nodeFs.writeFileSync(file, `${JSON.stringify(old, null, 2)}\n`)
      }
      nodeFs.rmSync(join(root, "index", "journal"), { recursive: true })
      nodeFs.rmSync(join(root, "index", "summary"), { recursive: true })
      const scan = yield* onDisk(root)
      assert.deepStrictEqual(
        [...new Set(scan.revisions.values())],
        [0],
        "every record decodes with revision 0"
      )
      const store = yield* storeAt(root, hostOf(Pids.a))
      assert.deepStrictEqual(yield* store.counts, countsOf(scan.records), "the first call builds the index")
      yield* assertAgrees(store, root, "old records", [2, undefined])
      // A queued one (receipts[2] is neither claimed nor cancelled): claimed, written as revision 1.
      const queued = receipts[2] ?? assert.fail("no receipt")
      assert.strictEqual(revisionOnDisk(root, queued.task_id), undefined)
      const claimed = yield* store.claim(queued.task_id, { workerId: "w", leaseMillis: 60_000 })
      assert.isTrue(Option.isSome(claimed))
      assert.strictEqual(revisionOnDisk(root, queued.task_id), 1)
      const listed = yield* store.list({ limit: 500 })
      assert.strictEqual(
        listed.tasks.find((task) => task.task_id === queued.task_id)?.state,
        "running",
        "the index takes revision 1 over the rebuilt revision 0"
      )
      yield* assertAgrees(store, root, "after the write", [2, undefined])
    })
  )
})

// ---------------------------------------------------------------------------------------------

const submitter = join(import.meta.dirname, "..", "support", "summarySubmitter.ts")

/** Run the submitter script as a process of its own; resolves with its stdout once it exits 0. */
class SubmitterFailed extends Data.TaggedError("SubmitterFailed")<{ readonly message: string }> {}

const runSubmitter = (root: string, name: string, count: number) =>
  Effect.async<string, SubmitterFailed>((resume) => {
    const child = spawn(process.execPath, ["--import", "tsx", submitter, root, name, String(count)], {
      env: spawnEnv(),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("error", (error) => resume(Effect.fail(new SubmitterFailed({ message: error.message }))))
    child.on("close", (code) =>
      resume(
        code === 0
          ? Effect.succeed(stdout)
          : Effect.fail(new SubmitterFailed({ message: `${name} exited ${code}: ${stderr}` }))
      )
    )
    return Effect.sync(() => child.kill("SIGKILL"))
  })

describe("summary index: several processes", () => {
  it.scopedLive(
    "processes submitting to one root at once: the parent's list equals the records",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        // The real Host, as the children have it: the same boot id, real pids.
        const store = yield* storeAt(root, "real")
        yield* store.check
        // The parent lists all the while: no listing fails, none shows a task twice.
        const done = yield* Deferred.make<void>()
        let listings = 0
        const lister = yield* Effect.fork(
          Effect.gen(function* () {
            while (!(yield* Deferred.isDone(done))) {
              const page = yield* store.list({ limit: 500 })
              const ids = page.tasks.map((task) => task.task_id)
              assert.strictEqual(new Set(ids).size, ids.length, "each task once")
              yield* store.counts
              listings += 1
              yield* Effect.sleep("20 millis")
            }
          })
        )
        const outputs = yield* Effect.all(
          ["p1", "p2", "p3"].map((name) => runSubmitter(root, name, 12)),
          { concurrency: "unbounded" }
        )
        yield* Deferred.succeed(done, undefined)
        yield* Fiber.join(lister)
        assert.isAbove(listings, 0)
        const children = outputs.map((output) => output.trim().split("\n").length)
        assert.deepStrictEqual(children, [12, 12, 12], "each child acknowledged every submit")
        yield* assertAgrees(store, root, "parent", [7, undefined])
        const { records } = yield* onDisk(root)
        assert.strictEqual(records.length, 36)
        // The children are gone: once their journals are folded, they are removed.
        yield* compactNow(root, "real")
        yield* Effect.scoped(
          Effect.flatMap(storeAt(root, "real"), (fresh) =>
            assertAgrees(fresh, root, "fresh parent instance", [undefined])
          )
        )
        const pid = String(process.pid)
        assert.deepStrictEqual(
          journalNames(root).filter((name) => name.split("-")[1] !== pid),
          [],
          "the children's journals were folded and removed"
        )
      }),
    30_000
  )
})
