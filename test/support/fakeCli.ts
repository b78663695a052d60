/**
 * The fake `claude` and `codex` executables (fixtures/bin/) and what running providers
 * in-process needs: a sandbox per test (a work dir, the fakes' record file, a finalizer that
 * kills whatever a fake left behind), the providers built from settings, and a worker pass.
 */
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { Effect, Either, Layer, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { ClientRequestId, TaskId } from "../../src/domain/ids.js"
import type { JsonObject } from "../../src/domain/Task.js"
import type { ProviderSettings } from "../../src/providers/settings.js"
import { defaultSettings } from "../../src/providers/settings.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { runPass } from "../../src/worker/pass.js"
import { tempDir } from "./stores.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"
import { providersLayer } from "../../src/providers/layer.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const fakeClaude = path.join(repo, "fixtures", "bin", "fake-claude")
export const fakeCodex = path.join(repo, "fixtures", "bin", "fake-codex")

/** One run of a fake, as it recorded itself. */
export const FakeRun = Schema.Struct({
  argv: Schema.Array(Schema.String),
  stdin_base64: Schema.String,
  cwd: Schema.String,
  env: Schema.Record({ key: Schema.String, value: Schema.String }),
  pid: Schema.Int
})
export type FakeRun = typeof FakeRun.Type
const decodeRun = Schema.decodeUnknownSync(Schema.parseJson(FakeRun))

const Pids = Schema.parseJson(
  Schema.Struct({ child: Schema.Int, grandchild: Schema.Int, escapee: Schema.optional(Schema.Int) })
)

/** Where `#!/usr/bin/env node` finds node: a child gets no PATH unless its environment has one. */
const pathWithNode = `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`

/**
 * Whether a process runs. A zombie counts as gone: it runs no code, it only waits to be reaped,
 * and an orphan's zombie waits for an init that may reap it late (as in some containers).
 * Without /proc, existence is all we can see.
 */
export const isRunning = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
  } catch (error) {
    return !(error instanceof Error && "code" in error && error.code === "ESRCH")
  }
  if (!fs.existsSync("/proc/self/stat")) return true
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
    return state !== "Z"
  } catch {
    return false
  }
}

/** SIGKILL `pid` if it still runs one of our fakes (its command line names `mark`), never another process. */
const killIfOurs = (pid: number, mark: string) => {
  if (!isRunning(pid)) return
  try {
    if (!fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(mark)) return
    process.kill(pid, "SIGKILL")
  } catch {
    // Gone meanwhile, or no /proc to tell whose it is: leave it.
  }
}

/** Running processes, other than this one, whose command line or environment names `dir`. */
const survivorsOf = (dir: string): ReadonlyArray<string> =>
  fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => pid !== process.pid)
    .flatMap((pid) => {
      try {
        const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
        const environ = fs.readFileSync(`/proc/${pid}/environ`, "utf8")
        return (cmdline.includes(dir) || environ.includes(dir)) && isRunning(pid)
          ? [`${pid}: ${cmdline.replaceAll("\0", " ")}`]
          : []
      } catch {
        return []
      }
    })

export interface Sandbox {
  readonly dir: string
  /** An existing directory for the CLIs to run in. */
  readonly workDir: string
  /** Where the fakes append one JSON line per run. */
  readonly recordFile: string
  /** Where the grandchild scenario writes its pids. */
  readonly pidsFile: string
  /** The environment for a fake playing `scenario`: PATH, the record file, and `extra`. */
  readonly env: (scenario: string, extra?: Readonly<Record<string, string>>) => Record<string, string>
  /** Every run recorded so far (none when the record file was never written). */
  readonly runs: () => ReadonlyArray<FakeRun>
  readonly recorded: () => boolean
  /** The exact bytes the last run wrote on stdout. */
  readonly stdoutBytes: () => Buffer
  /** The grandchildren's pids, once the fake wrote them (the escapes scenario adds `escapee`). */
  readonly pids: () => {
    readonly child: number
    readonly grandchild: number
    readonly escapee?: number | undefined
  }
  /**
   * The processes still running that belong to this sandbox (their command line or environment
   * names its directory), as "pid: command line": what must be empty once an attempt is over.
   */
  readonly survivors: () => ReadonlyArray<string>
  /** The lines the grandchild wrote for each SIGTERM it ignored. */
  readonly ignoredTerms: () => ReadonlyArray<string>
}

/** A fresh sandbox, removed when the test's scope closes, after killing anything a fake left. */
export const sandbox = Effect.gen(function* () {
  const dir = yield* tempDir
  const workDir = path.join(dir, "work")
  fs.mkdirSync(workDir)
  const recordFile = path.join(dir, "record.jsonl")
  const pidsFile = path.join(dir, "pids.json")
  const runs = () =>
    fs.existsSync(recordFile)
      ? fs
          .readFileSync(recordFile, "utf8")
          .split("\n")
          .filter((line) => line !== "")
          .map((line) => decodeRun(line))
      : []
  const pids = () => Schema.decodeUnknownSync(Pids)(fs.readFileSync(pidsFile, "utf8"))
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      // Fakes name fixtures/bin in their command line; grandchildren name the sandbox.
      for (const run of runs()) killIfOurs(run.pid, path.join("fixtures", "bin", "fake-"))
      if (fs.existsSync(pidsFile)) {
        const { grandchild, escapee } = pids()
        killIfOurs(grandchild, dir)
        if (escapee !== undefined) killIfOurs(escapee, dir)
      }
      for (const line of survivorsOf(dir)) killIfOurs(Number(line.split(":")[0]), dir)
    })
  )
  const box: Sandbox = {
    dir,
    workDir,
    recordFile,
    pidsFile,
    env: (scenario, extra = {}) => ({
      PATH: pathWithNode,
      FAKE_RECORD: recordFile,
      FAKE_PIDS: pidsFile,
      FAKE_SCENARIO: scenario,
      FAKE_LIFETIME_MS: "30000",
      ...extra
    }),
    runs,
    recorded: () => fs.existsSync(recordFile),
    stdoutBytes: () => fs.readFileSync(`${recordFile}.stdout`),
    pids,
    survivors: () => survivorsOf(dir),
    ignoredTerms: () =>
      fs.existsSync(`${pidsFile}.term`)
        ? fs
            .readFileSync(`${pidsFile}.term`, "utf8")
            .split("\n")
            .filter((line) => line !== "")
        : []
  }
  return box
})

/** The only run a test expects, with its stdin decoded to the exact bytes. */
export const onlyRun = (box: Sandbox): FakeRun & { readonly stdin: Buffer } => {
  const runs = box.runs()
  const [run] = runs
  if (runs.length !== 1 || run === undefined)
    throw new Error(`expected one run of the fake, got ${runs.length}`)
  return { ...run, stdin: Buffer.from(run.stdin_base64, "base64") }
}

/** Test settings: no provider configured, short limits unless a test says otherwise. */
export const settings = (overrides: Partial<ProviderSettings> = {}): ProviderSettings => ({
  ...defaultSettings,
  taskTimeoutMillis: 20_000,
  killGraceMillis: 1_000,
  ...overrides
})

/** A URL the settings accept, as the worker parses it. */
export const url = (text: string): URL => new URL(text)

const platform = Layer.mergeAll(nodeContextLayer, NodeHttpClient.layer)

/** Every provider, as a worker with these settings and this environment builds them. */
export const providerLayer = (config: ProviderSettings, environment: Readonly<Record<string, string>> = {}) =>
  providersLayer(config).pipe(Layer.provide(Host.layerTest({ environment })), Layer.provide(platform))

/** A memory store and every provider: for tests that read what a worker pass records. */
export const workerLayer = (config: ProviderSettings, environment: Readonly<Record<string, string>> = {}) =>
  Layer.mergeAll(memoryTaskStoreLayer(), providersLayer(config)).pipe(
    Layer.provideMerge(Host.layerTest({ environment })),
    Layer.provide(platform)
  )

/**
 * The task runProvider runs, unique to each test file: vitest runs files at the same time, and a
 * stop reaches every process that carries its task's id and attempt, so files must not share one.
 */
export const someTaskId = TaskId.make(randomBytes(32).toString("hex"))

/** One attempt of one task, straight through the providers; the outcome as an Either. */
export const runProvider = (payload: JsonObject) =>
  Effect.flatMap(Provider, (provider) =>
    Effect.either(provider.run({ taskId: someTaskId, attempt: 1, payload }))
  )

/** The failure of an outcome that a test expects to fail (a success fails the test). */
export const failureOf = <A, E>(outcome: Either.Either<A, E>): E => {
  if (Either.isRight(outcome)) throw new Error(`expected a failure, got ${JSON.stringify(outcome.right)}`)
  return outcome.left
}

const hasTag = <E extends { readonly _tag: string }, T extends E["_tag"]>(
  error: E,
  tag: T
): error is Extract<E, { readonly _tag: T }> => error._tag === tag

/** The failure of an outcome that a test expects to fail with `tag` (anything else fails the test). */
export const failureTagged = <A, E extends { readonly _tag: string }, T extends E["_tag"]>(
  outcome: Either.Either<A, E>,
  tag: T
): Extract<E, { readonly _tag: T }> => {
  const error = failureOf(outcome)
  if (!hasTag(error, tag)) throw new Error(`expected ${tag}, got ${JSON.stringify(error)}`)
  return error
}

/** The success of an outcome that a test expects to succeed (a failure fails the test). */
export const successOf = <A, E>(outcome: Either.Either<A, E>): A => {
  if (Either.isLeft(outcome)) throw new Error(`expected a success, got ${JSON.stringify(outcome.left)}`)
  return outcome.right
}

/** Submit one task, run one worker pass, and read the task back: what a reader would see. */
export const submitAndRun = (payload: JsonObject) =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const receipt = yield* store.submit({ clientRequestId: ClientRequestId.make("provider-test"), payload })
    const report = yield* runPass({ workerId: "provider-test", leaseMillis: 60_000 })
    if (!report.dispatched.includes(receipt.task_id)) throw new Error("the pass did not run the task")
    return yield* store.read(receipt.task_id, receipt.payload_sha256)
  })
