/**
 * Shared by the chaos tests that drive real `relaykeep worker --watch` processes (kills.test.ts,
 * claimRace.test.ts): starting workers with their stdout and stderr in files, reading their JSON
 * events, the records and the fake provider's side effects back, bounded waits, and cleanup of
 * every process started here.
 */
import { afterAll, assert } from "@effect/vitest"
import { Effect, Exit, Schema, Scope } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import pg from "pg"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { JsonObject, Receipt } from "../../src/domain/Task.js"
import { TaskRecord } from "../../src/domain/Task.js"
import { relaykeepBin } from "../support/cli.js"
import { spawnEnv } from "../support/environment.js"
import { isRunning } from "../support/fakeCli.js"
import { pgQuery, pgStoreAt, pgUrl } from "../support/pg.js"

/** Where `#!/usr/bin/env node` (the fake CLIs) finds node. */
export const pathWithNode = `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`

/** The environment of a spawned binary: the test's own, minus every variable that picks a store. */
export const childEnv = (extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv => spawnEnv(extra)

/**
 * Fresh temp directories, removed after the calling file's tests (kept, for a post-mortem,
 * when RELAYKEEP_CHAOS_KEEP is set).
 */
export const useChaosDirs = (): (() => string) => {
  const made: Array<string> = []
  afterAll(() => {
    if (process.env["RELAYKEEP_CHAOS_KEEP"] !== undefined) return
    for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "relaykeep-chaos-"))
    made.push(dir)
    return dir
  }
}

export interface Exit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

export interface WorkerProcess {
  readonly pid: number
  readonly stdoutFile: string
  readonly stderrFile: string
  /** Resolves once the process has exited. */
  readonly exited: Promise<Exit>
  /** The exit, once there is one. */
  readonly exit: () => Exit | undefined
}

/** Every worker started by this module and not yet seen exiting: killed in `killAllWorkers`. */
const started = new Set<WorkerProcess>()

let serial = 0

/**
 * Start `relaykeep worker --watch ...args` with stdout and stderr in files under `logDir`
 * (numbered in start order), so that what a worker wrote survives a SIGKILL.
 */
export const startWorker = (
  logDir: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {}
): WorkerProcess => {
  serial += 1
  const stdoutFile = path.join(logDir, `worker-${serial}.stdout`)
  const stderrFile = path.join(logDir, `worker-${serial}.stderr`)
  const out = fs.openSync(stdoutFile, "w")
  const err = fs.openSync(stderrFile, "w")
  try {
    const child = spawn(process.execPath, [relaykeepBin, "worker", "--watch", ...args], {
      env: childEnv(env),
      stdio: ["ignore", out, err]
    })
    const pid = child.pid
    if (pid === undefined) throw new Error("a worker did not start")
    let exit: Exit | undefined
    const exited = new Promise<Exit>((resolve) => {
      const ended = (code: number | null, signal: NodeJS.Signals | null) => {
        exit ??= { code, signal }
        started.delete(worker)
        resolve(exit)
      }
      child.on("exit", ended)
      // A spawn that failed (no exit follows): neither a code nor a signal.
      child.on("error", () => ended(null, null))
    })
    const worker: WorkerProcess = { pid, stdoutFile, stderrFile, exited, exit: () => exit }
    started.add(worker)
    return worker
  } finally {
    fs.closeSync(out)
    fs.closeSync(err)
  }
}

/** SIGKILL every worker this module started that still runs (a finalizer: failures do not leak). */
export const killAllWorkers = async (): Promise<void> => {
  const left = [...started]
  for (const worker of left) {
    try {
      process.kill(worker.pid, "SIGKILL")
    } catch {
      // Gone meanwhile.
    }
  }
  await Promise.all(left.map((worker) => withTimeout(worker.exited, 10_000)))
}

/** Resolve with the promise's value, or with undefined once `millis` have passed. */
export const withTimeout = <A>(promise: Promise<A>, millis: number): Promise<A | undefined> =>
  new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), millis)
    void promise.then((value) => {
      clearTimeout(timer)
      resolve(value)
    })
  })

export const delay = (millis: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, millis))

/** Poll `condition` every `everyMillis` until it holds (true) or `timeoutMillis` passed (false). */
export const waitFor = async (
  condition: () => boolean,
  timeoutMillis: number,
  everyMillis = 250
): Promise<boolean> => {
  const deadline = Date.now() + timeoutMillis
  while (true) {
    if (condition()) return true
    if (Date.now() >= deadline) return false
    await delay(everyMillis)
  }
}

/** SIGTERM a worker and wait (bounded) for its exit; undefined if it did not exit in time. */
export const stopWorker = async (worker: WorkerProcess, timeoutMillis: number): Promise<Exit | undefined> => {
  if (worker.exit() === undefined) {
    try {
      process.kill(worker.pid, "SIGTERM")
    } catch {
      // Already gone: its exit says how.
    }
  }
  return withTimeout(worker.exited, timeoutMillis)
}

/** The lines a worker wrote on stderr that are its JSON events (the logger's lines are not JSON). */
const eventLines = (file: string): ReadonlyArray<unknown> => {
  const text = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
  const lines = text.split("\n")
  // A worker killed mid-write may leave a last line without its newline: not an event yet.
  const complete = text.endsWith("\n") ? lines : lines.slice(0, -1)
  const events: Array<unknown> = []
  for (const line of complete) {
    if (!line.startsWith("{")) continue
    events.push(decodeJson(line))
  }
  return events
}

const decodeJson = Schema.decodeUnknownSync(Schema.parseJson())

export const ClaimedEvent = Schema.Struct({
  event: Schema.Literal("claimed"),
  task_id: Schema.String,
  attempt: Schema.Int,
  provider: Schema.String
})
export type ClaimedEvent = typeof ClaimedEvent.Type

/** An attempt that ended, as its worker saw it: it finished (any outcome) or was released. */
export const EndedEvent = Schema.Struct({
  event: Schema.Literal("finished", "released"),
  task_id: Schema.String,
  attempt: Schema.Int
})

export const ReapedEvent = Schema.Struct({
  event: Schema.Literal("reaped"),
  task_id: Schema.String,
  attempt: Schema.Int,
  reason: Schema.String,
  state: Schema.String
})
export type ReapedEvent = typeof ReapedEvent.Type

export interface WorkerEvents {
  readonly claimed: ReadonlyArray<ClaimedEvent>
  readonly ended: ReadonlyArray<typeof EndedEvent.Type>
  readonly reaped: ReadonlyArray<ReapedEvent>
  readonly all: ReadonlyArray<unknown>
}

const StartedEvent = Schema.Struct({ event: Schema.Literal("started"), pid: Schema.Int })

const isStarted = Schema.is(StartedEvent)
const isClaimed = Schema.is(ClaimedEvent)
const isEnded = Schema.is(EndedEvent)
const isReaped = Schema.is(ReapedEvent)

export const workerEvents = (worker: WorkerProcess): WorkerEvents => {
  const all = eventLines(worker.stderrFile)
  return {
    claimed: all.filter(isClaimed),
    ended: all.filter(isEnded),
    reaped: all.filter(isReaped),
    all
  }
}

/**
 * Whether the worker is watching: it has printed its "started" event, which comes after it took
 * over SIGINT and SIGTERM (before that, a SIGTERM ends the process as any node process).
 */
export const hasStarted = (worker: WorkerProcess): boolean => workerEvents(worker).all.some(isStarted)

/** Attempts this worker claimed and has not reported ending: work in flight. */
export const inFlight = (worker: WorkerProcess): number => {
  const events = workerEvents(worker)
  return events.claimed.length - events.ended.length
}

const decodeRecord = Schema.decodeUnknownSync(Schema.parseJson(TaskRecord))

/** Every record under `<root>/tasks`, decoded (a damaged record throws). */
export const readRecords = (root: string): ReadonlyArray<TaskRecord> =>
  fs
    .readdirSync(path.join(root, "tasks"))
    .filter((name) => name.endsWith(".json"))
    .map((name) => decodeRecord(fs.readFileSync(path.join(root, "tasks", name), "utf8")))

/**
 * How many live markers the index holds (queued plus running): cheap enough to poll while
 * workers run. Zero means every record has left the live states (the marker invariant of
 * docs/file-store.md); the records themselves are read once, at the end.
 */
export const liveMarkers = (root: string): number =>
  ["queued", "running"].reduce((sum, dir) => {
    const full = path.join(root, "index", dir)
    return sum + (fs.existsSync(full) ? fs.readdirSync(full).length : 0)
  }, 0)

/** How many records are in each state. */
export const stateCounts = (records: ReadonlyArray<TaskRecord>): Readonly<Record<string, number>> => {
  const counts: Record<string, number> = {}
  for (const record of records) counts[record.state] = (counts[record.state] ?? 0) + 1
  return counts
}

/** One line the fake provider's scripted scenario appends to $FAKE_EFFECTS. */
export const SideEffect = Schema.Struct({
  event: Schema.Literal("start", "done"),
  task_id: Schema.String,
  attempt: Schema.Int,
  pid: Schema.Int,
  at: Schema.Number
})
export type SideEffect = typeof SideEffect.Type

const decodeEffect = Schema.decodeUnknownSync(Schema.parseJson(SideEffect))

export const readSideEffects = (file: string): ReadonlyArray<SideEffect> =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => decodeEffect(line))
    : []

const fakeMark = path.join("fixtures", "bin", "fake-")

/** Whether `pid` is still one of the fake providers (its command line names fixtures/bin/fake-), not a reuse of its pid. */
export const fakeRunning = (pid: number): boolean => {
  if (!isRunning(pid)) return false
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(fakeMark)
  } catch {
    return false
  }
}

/** SIGKILL a fake provider left running, never another process that reused its pid. */
export const killFakeIfRunning = (pid: number): void => {
  if (!fakeRunning(pid)) return
  try {
    process.kill(pid, "SIGKILL")
  } catch {
    // Gone meanwhile.
  }
}

/** A small seeded generator (mulberry32), so a failing run can be told apart by its seed. */
export const seededRandom = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** One line on the test's stderr when RELAYKEEP_CHAOS_REPORT is set: numbers for a human. */
export const report = (name: string, facts: Readonly<Record<string, unknown>>): void => {
  if (process.env["RELAYKEEP_CHAOS_REPORT"] === undefined) return
  process.stderr.write(`[chaos] ${name}: ${JSON.stringify(facts)}\n`)
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL (issue 6): the same chaos over a queue in a schema of the test's own
// ---------------------------------------------------------------------------------------------

/**
 * The flags that point a command at the default queue of `schema` on RELAYKEEP_TEST_PG_URL
 * (the queue named too, though `childEnv` drops a RELAYKEEP_QUEUE of the developer's shell).
 */
export const pgStoreArgs = (schema: string): ReadonlyArray<string> => {
  if (pgUrl === undefined) throw new Error("RELAYKEEP_TEST_PG_URL is not set")
  return ["--store", pgUrl, "--pg-schema", schema, "--queue", "default"]
}

/** Poll an asynchronous `condition` until it holds (true) or `timeoutMillis` passed (false). */
export const waitForAsync = async (
  condition: () => Promise<boolean>,
  timeoutMillis: number,
  everyMillis = 250
): Promise<boolean> => {
  const deadline = Date.now() + timeoutMillis
  while (true) {
    if (await condition()) return true
    if (Date.now() >= deadline) return false
    await delay(everyMillis)
  }
}

export interface PgQueue {
  readonly submit: (id: string, payload: JsonObject) => Promise<Receipt>
  /** Tasks queued or running: zero once every one has reached an end. */
  readonly live: () => Promise<number>
  readonly close: () => Promise<void>
}

const LiveCount = Schema.Array(Schema.Struct({ live: Schema.NumberFromString }))
const decodeLiveCount = Schema.decodeUnknownSync(LiveCount)

/**
 * The default queue of `schema`, opened once in this process: submissions through the real
 * PostgreSQL store (submitting is not what these tests are about), and the count of live tasks
 * straight from the table on a connection of its own, so that a broken store under test
 * cannot make the queue look drained.
 */
export const openPgQueue = async (schema: string): Promise<PgQueue> => {
  if (pgUrl === undefined) throw new Error("RELAYKEEP_TEST_PG_URL is not set")
  const scope = await Effect.runPromise(Scope.make())
  const store = await Effect.runPromise(Scope.extend(pgStoreAt(schema), scope))
  const client = new pg.Client({ connectionString: pgUrl })
  await client.connect()
  return {
    submit: (id, payload) =>
      Effect.runPromise(store.submit({ clientRequestId: ClientRequestId.make(id), payload })),
    live: async () => {
      const result = await client.query(
        `SELECT count(*) AS live FROM "${schema}".tasks WHERE queue = 'default' AND state IN ('queued', 'running')`
      )
      return decodeLiveCount(result.rows)[0]?.live ?? 0
    },
    close: async () => {
      await client.end()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
}

const PgRecordRow = Schema.Struct({
  task_id: Schema.String,
  state: Schema.String,
  record: Schema.String,
  payload: Schema.NullOr(Schema.String)
})
const decodePgRecordRows = Schema.decodeUnknownSync(Schema.Array(PgRecordRow))
const decodeJsonObject = Schema.decodeUnknownSync(
  Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
)
/**
 * Every record of the default queue in `schema`, straight from the table and decoded (with its
 * payload from the payload column, where the row keeps it there); a row whose record does not
 * decode, or whose state column disagrees with its record, throws.
 */
export const readPgRecords = async (schema: string): Promise<ReadonlyArray<TaskRecord>> => {
  const rows = decodePgRecordRows(
    await pgQuery(`SELECT task_id, state, record, payload FROM "${schema}".tasks WHERE queue = 'default'`)
  )
  return rows.map((row) => {
    const whole =
      row.payload === null
        ? row.record
        : JSON.stringify({ ...decodeJsonObject(row.record), payload: decodeJson(row.payload) })
    const record = decodeRecord(whole)
    if (record.task_id !== row.task_id || record.state !== row.state)
      throw new Error(`the row of ${row.task_id} (state ${row.state}) disagrees with its record`)
    return record
  })
}

/**
 * The claims the workers reported, checked: no (task, attempt) claimed twice, every claim a
 * first attempt, and each of `expected` (sorted task ids) claimed exactly once.
 */
export const claimedOnceEach = (
  workers: ReadonlyArray<WorkerProcess>,
  expected: ReadonlyArray<string>
): ReadonlyArray<ClaimedEvent & { readonly pid: number }> => {
  const claims = workers.flatMap((worker) =>
    workerEvents(worker).claimed.map((event): ClaimedEvent & { readonly pid: number } => ({
      ...event,
      pid: worker.pid
    }))
  )
  const byAttempt = new Map<string, Array<number>>()
  for (const claim of claims) {
    const key = `${claim.task_id}#${claim.attempt}`
    byAttempt.set(key, [...(byAttempt.get(key) ?? []), claim.pid])
  }
  assert.deepStrictEqual(
    [...byAttempt].filter(([, pids]) => pids.length > 1),
    [],
    "no (task, attempt) claimed by two workers, or twice by one"
  )
  assert.deepStrictEqual(
    claims.filter((claim) => claim.attempt !== 1),
    [],
    "every claim is a first attempt"
  )
  assert.deepStrictEqual(
    [...claims.map((claim) => claim.task_id)].sort(),
    [...expected],
    "each task claimed once"
  )
  return claims
}
