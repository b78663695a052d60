/**
 * list-vs-history: the listings and counts that `relaykeep list` and the dashboard show, on a root
 * holding 100 finished tasks and on one holding 100,000 (each also holding 10 queued tasks). A page
 * must cost O(page) and the counts O(1) or O(live tasks): the finished tasks must not slow them.
 *
 * Each root is a real file store whose tasks the store itself wrote (submitted, claimed and
 * completed through the library API, with the echo provider's result). So that filling 100,000 tasks
 * does not wait for the disk, the fill runs on a FileSystem whose fsyncs do nothing: the records,
 * markers and every other file are written by the same code, byte for byte; only their durability
 * is skipped, and only during setup. The measured runs open the root again on the real FileSystem.
 * Each root's store stays open across runs, as the dashboard's does; `cold-list` opens a store for
 * one listing and the counts and closes it again, as a `relaykeep list` process does.
 *
 * `RELAYKEEP_BENCH_LIST_HISTORY=N` fills the larger root with N finished tasks instead of 100,000
 * (a quick check that the benchmark works; its series are then named `…/history-N`).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Layer, ManagedRuntime } from "effect"
import { lstatSync, mkdirSync, readdirSync } from "node:fs"
import path from "node:path"
import { Host, TaskStore } from "../../src/index.js"
import { EchoProviderName } from "../../src/domain/provider.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { DefaultListLimit } from "../../src/store/shared.js"
import type { Benchmark } from "../harness.js"
import { finishTasks, submitTasks } from "../history.js"
import { now } from "../timing.js"

/** Queued tasks on each root. */
const Queued = 10
const SmallHistory = 100
const historyKnob = process.env["RELAYKEEP_BENCH_LIST_HISTORY"]
/** Finished tasks on the larger root: 100,000 unless the knob says otherwise (checked in setup). */
const LargeHistory = historyKnob === undefined || historyKnob === "" ? 100_000 : Number(historyKnob)
const Histories: ReadonlyArray<{ readonly series: string; readonly finished: number }> = [
  { series: `history-${SmallHistory}`, finished: SmallHistory },
  { series: `history-${LargeHistory}`, finished: LargeHistory }
]
/** The operations judged against the target; `cold-list` is reported beside them. */
const Judged = ["first-page", "complete-page", "queued-page", "provider-page", "counts"]
/** Each large-history series at most this many times the small one's, and under this many ms. */
const MaxRatio = 2
const UnderMillis = 50
/** A progress line every this many tasks while a root is filled. */
const ProgressEvery = 10_000

/**
 * The FileSystem the store runs on, except that fsync does nothing: for filling a root, never for
 * a measured run. Every fsync the store makes is an open file's `sync`: a record's or temp file's
 * before its link or rename (`durable.ts`, `writeNew`), and a directory's after it (`syncDirectory`
 * opens the directory and syncs that handle, also when `makeSharedSync` shares it). So the files
 * that `open` returns are the one thing replaced; `skipped` counts the fsyncs left out.
 */
const noSyncContext = (skipped: { count: number }) =>
  Layer.merge(
    nodeContextLayer,
    Layer.effect(
      FileSystem.FileSystem,
      Effect.map(FileSystem.FileSystem, (files): FileSystem.FileSystem => ({
        ...files,
        open: (file, options) =>
          Effect.map(files.open(file, options), (handle) => ({
            ...handle,
            sync: Effect.sync(() => {
              skipped.count++
            })
          }))
      }))
    ).pipe(Layer.provide(nodeContextLayer))
  )

/** A file store over `root`, on `context`'s FileSystem. */
const openStore = (root: string, context: typeof nodeContextLayer) =>
  ManagedRuntime.make(fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layer), Layer.provide(context)))
type Store = ReturnType<typeof openStore>

const progress = (log: (line: string) => void, what: string, total: number) => {
  let done = 0
  return Effect.sync(() => {
    done++
    if (done % ProgressEvery === 0 || done === total) log(`list-vs-history: ${what} ${done}/${total}`)
  })
}

/** Finish `count` tasks the way a worker does (claim, then complete with echo's result), then queue some. */
const fillRoot = (series: string, count: number, log: (line: string) => void) =>
  Effect.gen(function* () {
    const ids = yield* submitTasks("history", count, progress(log, `${series}: submitted`, count))
    yield* finishTasks(ids, progress(log, `${series}: finished`, count))
    yield* submitTasks("queued", Queued)
  })

const expectLength = (what: string, got: number, expected: number) => {
  if (got !== expected) throw new Error(`${what}: ${got} tasks listed, not ${expected}`)
}

/** The five operations, each timed on its own and its answer checked, so that none passes by answering nothing. */
const measureWarm = async (
  store: Store,
  series: string,
  finished: number,
  figures: Record<string, number>
) => {
  const total = finished + Queued
  const timed = async <A>(operation: string, effect: Effect.Effect<A, unknown, TaskStore>): Promise<A> => {
    const start = now()
    const value = await store.runPromise(effect)
    figures[`${operation}/${series}`] = now() - start
    return value
  }
  const first = await timed(
    "first-page",
    Effect.flatMap(TaskStore, (tasks) => tasks.list({}))
  )
  expectLength(`${series} first page`, first.tasks.length, Math.min(DefaultListLimit, total))
  const complete = await timed(
    "complete-page",
    Effect.flatMap(TaskStore, (tasks) => tasks.list({ state: "complete" }))
  )
  expectLength(`${series} complete page`, complete.tasks.length, Math.min(DefaultListLimit, finished))
  if (complete.tasks.some((task) => task.state !== "complete"))
    throw new Error(`${series}: the complete page lists a task that is not complete`)
  const queued = await timed(
    "queued-page",
    Effect.flatMap(TaskStore, (tasks) => tasks.list({ state: "queued" }))
  )
  expectLength(`${series} queued page`, queued.tasks.length, Math.min(DefaultListLimit, Queued))
  if (queued.tasks.some((task) => task.state !== "queued"))
    throw new Error(`${series}: the queued page lists a task that is not queued`)
  const provider = await timed(
    "provider-page",
    Effect.flatMap(TaskStore, (tasks) => tasks.list({ provider: EchoProviderName }))
  )
  expectLength(`${series} provider page`, provider.tasks.length, Math.min(DefaultListLimit, total))
  const counts = await timed(
    "counts",
    Effect.flatMap(TaskStore, (tasks) => tasks.counts)
  )
  checkCounts(series, counts, finished)
}

const checkCounts = (series: string, counts: Readonly<Record<string, number>>, finished: number) => {
  if (counts["complete"] !== finished || counts["queued"] !== Queued)
    throw new Error(
      `${series}: counts say ${counts["complete"]} complete and ${counts["queued"]} queued, not ${finished} and ${Queued}`
    )
}

/** A store opened for one listing and the counts, then closed: what a `relaykeep list` process pays. */
const measureCold = async (
  root: string,
  series: string,
  finished: number,
  figures: Record<string, number>
) => {
  const start = now()
  const store = openStore(root, nodeContextLayer)
  const [page, counts] = await store
    .runPromise(Effect.flatMap(TaskStore, (tasks) => Effect.zip(tasks.list({}), tasks.counts)))
    .finally(() => store.dispose())
  figures[`cold-list/${series}`] = now() - start
  expectLength(`${series} cold first page`, page.tasks.length, Math.min(DefaultListLimit, finished + Queued))
  checkCounts(`${series} cold`, counts, finished)
}

const countRecords = (root: string) =>
  readdirSync(path.join(root, "tasks")).filter((name) => name.endsWith(".json")).length

/** Files and bytes under `dir`, all the way down (links not followed); null when there is no `dir`. */
const treeSize = (dir: string): { files: number; bytes: number } | null => {
  const stat = lstatSync(dir, { throwIfNoEntry: false })
  if (stat === undefined) return null
  if (!stat.isDirectory()) return { files: 1, bytes: stat.size }
  return readdirSync(dir).reduce(
    (sum, name) => {
      const inner = treeSize(path.join(dir, name))
      return inner === null ? sum : { files: sum.files + inner.files, bytes: sum.bytes + inner.bytes }
    },
    { files: 0, bytes: 0 }
  )
}

/** 100000 as 100,000, as the titles of the other benchmarks write counts. */
const thousands = (count: number) => String(count).replace(/\B(?=(\d{3})+(?!\d))/g, ",")

const seriesOf = (operation: string, finished: number) => `${operation}/history-${finished}`

export const listVsHistory: Benchmark = {
  name: "list-vs-history",
  title: `The first page of \`list\` (unfiltered, by state complete, by state queued, by provider) and \`counts\`, on file-store roots that hold ${SmallHistory} and ${thousands(LargeHistory)} finished tasks beside ${Queued} queued ones, each on a store kept open across runs; and \`cold-list\`, one listing and the counts on a store opened and closed for them; in milliseconds.`,
  baseline: `the same operation on the root that holds ${SmallHistory} finished tasks`,
  unit: "ms",
  target: {
    kind: "each-at-most",
    pairs: Judged.map((operation) => ({
      subject: seriesOf(operation, LargeHistory),
      baseline: seriesOf(operation, SmallHistory),
      max: MaxRatio,
      under: UnderMillis
    }))
  },
  setup: async ({ dir, log }) => {
    if (!Number.isInteger(LargeHistory) || LargeHistory <= SmallHistory)
      throw new Error(
        `RELAYKEEP_BENCH_LIST_HISTORY must be an integer above ${SmallHistory}, not ${String(historyKnob)}`
      )
    const roots = new Map<
      string,
      { readonly root: string; readonly finished: number; readonly store: Store }
    >()
    const fillMillis: Record<string, number> = {}
    const fsyncsSkipped: Record<string, number> = {}
    const closeAll = () => Promise.all([...roots.values()].map(({ store }) => store.dispose()))
    try {
      for (const { series, finished } of Histories) {
        const root = path.join(dir, series)
        mkdirSync(root)
        log(`list-vs-history: finishing ${finished} tasks on ${series} (fsyncs skipped)`)
        const skipped = { count: 0 }
        const filler = openStore(root, noSyncContext(skipped))
        const started = now()
        await filler.runPromise(fillRoot(series, finished, log)).finally(() => filler.dispose())
        fillMillis[series] = Math.round(now() - started)
        fsyncsSkipped[series] = skipped.count
        // The measured store: the real FileSystem, opened (not in any run) once the filling one is closed.
        const store = openStore(root, nodeContextLayer)
        roots.set(series, { root, finished, store })
        await store.runtime()
      }
    } catch (error) {
      await closeAll()
      throw error
    }

    return {
      run: async (index) => {
        const figures: Record<string, number> = {}
        // Rotate the order, so that neither root always runs first in a run.
        const turn = (index + 1) % Histories.length
        for (const { series } of [...Histories.slice(turn), ...Histories.slice(0, turn)]) {
          const entry = roots.get(series)
          if (entry === undefined) throw new Error(`no root for ${series}`)
          await measureWarm(entry.store, series, entry.finished, figures)
          await measureCold(entry.root, series, entry.finished, figures)
        }
        return figures
      },
      details: () => ({
        queued_per_root: Queued,
        tasks_per_root: Object.fromEntries(
          [...roots].map(([series, { root }]) => [series, countRecords(root)])
        ),
        fill_ms: fillMillis,
        fill_fsyncs_skipped: fsyncsSkipped,
        index_dir: Object.fromEntries(
          [...roots].map(([series, { root }]) => [series, treeSize(path.join(root, "index"))])
        )
      }),
      close: async () => {
        await closeAll()
      }
    }
  }
}
