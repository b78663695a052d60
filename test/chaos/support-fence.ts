/**
 * What the process-driving chaos tests (fence, killTree, retry) share: a sandbox per test with a
 * data root, a work dir and the scripted fake's side-effect and pid files; workers started as
 * real processes with their logs in files; bounded waits; and a cleanup that kills, by pid,
 * every process a test started or a fake left behind.
 */
import { afterEach } from "@effect/vitest"
import { Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { setTimeout as delay } from "node:timers/promises"
import { TaskRecord } from "../../src/domain/Task.js"
import type { JsonObject, Receipt } from "../../src/domain/Task.js"
import { WatchSummary } from "../../src/worker/watch.js"
import { relaykeepBin } from "../support/cli.js"
import { fakeClaude, isRunning } from "../support/fakeCli.js"
import { recordPath, useTempDirs } from "../support/files.js"
import { seedTasks } from "../support/stores.js"

/** The plan the scripted fake reads from its prompt. */
export interface Plan {
  readonly sleep_ms?: number
  readonly fail_attempts?: number
  readonly tree?: boolean
  /** How the tree's grandchild leaves the child's process group (see fixtures/bin/fake-cli.mjs). */
  readonly escape?: "setsid" | "session"
}

/** A payload that runs the scripted fake claude with `plan`. */
export const scriptedPayload = (plan: Plan): JsonObject => ({
  provider: "claude",
  model: "sonnet",
  prompt: JSON.stringify(plan)
})

/** One side effect the scripted fake recorded. */
export const SideEffectLine = Schema.Struct({
  event: Schema.Literal("start", "done"),
  task_id: Schema.NullOr(Schema.String),
  attempt: Schema.Int,
  pid: Schema.Int,
  at: Schema.Number
})
export type SideEffect = typeof SideEffectLine.Type
const decodeEffect = Schema.decodeUnknownSync(Schema.parseJson(SideEffectLine))

const Pids = Schema.Struct({ child: Schema.Int, grandchild: Schema.Int })
const decodePids = Schema.decodeUnknownSync(Schema.parseJson(Pids))
const decodeRecord = Schema.decodeUnknownSync(Schema.parseJson(TaskRecord))
const decodeSummary = Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })

/** A worker event as `--log-format json` writes it: only the fields the tests look at. */
const LoggedEvent = Schema.Struct({
  event: Schema.String,
  task_id: Schema.optional(Schema.String),
  attempt: Schema.optional(Schema.Number),
  outcome: Schema.optional(Schema.String)
})
export type LoggedEvent = typeof LoggedEvent.Type
const decodeEvent = Schema.decodeUnknownOption(Schema.parseJson(LoggedEvent))

export interface Exited {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** A process a test started: its pid, its logs (files), and its exit. */
export interface Started {
  readonly name: string
  readonly pid: number
  readonly exited: Promise<Exited>
  /** Undefined while it runs. */
  readonly exit: () => Exited | undefined
  readonly stdout: () => string
  readonly stderr: () => string
  /** The worker events in its stderr (`--log-format json`). */
  readonly events: () => ReadonlyArray<LoggedEvent>
  /** The WatchSummary it printed on stdout when it stopped. */
  readonly summary: () => WatchSummary
}

/** Poll `probe` until it returns a value, failing after `timeoutMillis` with what was awaited. */
export const waitUntil = async <A>(
  what: string,
  probe: () => A | undefined,
  timeoutMillis: number,
  context: () => string = () => ""
): Promise<A> => {
  const deadline = Date.now() + timeoutMillis
  for (;;) {
    const value = probe()
    if (value !== undefined) return value
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMillis} ms waiting for ${what}\n${context()}`)
    await delay(40)
  }
}

/** `promise`, or an error after `timeoutMillis` (a bound on a wait, never a measurement). */
export const within = <A>(what: string, promise: Promise<A>, timeoutMillis: number): Promise<A> =>
  Promise.race([
    promise,
    delay(timeoutMillis, undefined, { ref: false }).then(() => {
      throw new Error(`timed out after ${timeoutMillis} ms waiting for ${what}`)
    })
  ])

const readLines = (file: string): ReadonlyArray<string> =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line !== "")
    : []

const readText = (file: string): string => (fs.existsSync(file) ? fs.readFileSync(file, "utf8") : "")

/** SIGKILL `pid` if it still runs and its command line names one of `marks`; never another process. */
const killIfOurs = (pid: number, marks: ReadonlyArray<string>) => {
  if (!isRunning(pid)) return
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
    if (!marks.some((mark) => cmdline.includes(mark))) return
    process.kill(pid, "SIGKILL")
  } catch {
    // Gone meanwhile, or no /proc to tell whose it is: leave it.
  }
}

const signal = (pid: number, name: NodeJS.Signals) => {
  try {
    process.kill(pid, name)
  } catch {
    // Already gone.
  }
}

export interface Chaos {
  readonly dir: string
  readonly root: string
  readonly workDir: string
  /** Where the scripted fake appends its start/done lines. */
  readonly effectsFile: string
  /** Where the tree plan writes `<task_id>-<attempt>.json` with the child and grandchild pids. */
  readonly pidsDir: string
  /** The environment every worker here runs with (the fake reads it through the worker). */
  readonly env: Readonly<Record<string, string>>
  /** `relaykeep worker ...args --root --claude-executable --work-dir`, logs in files. */
  readonly startWorker: (name: string, args: ReadonlyArray<string>) => Started
  readonly submit: (
    requests: ReadonlyArray<{ readonly id: string; readonly payload: JsonObject }>
  ) => Promise<ReadonlyArray<Receipt>>
  /** The record as it is on disk now; undefined before it exists. */
  readonly record: (taskId: string) => TaskRecord | undefined
  readonly effects: () => ReadonlyArray<SideEffect>
  /** The child and grandchild of one attempt of the tree plan, once both are ready. */
  readonly treePids: (
    taskId: string,
    attempt: number
  ) => { readonly child: number; readonly grandchild: number } | undefined
}

/**
 * A maker of chaos sandboxes for the calling file. After each test, every process it started
 * is killed by pid (a stopped one is continued first), and so is every fake process whose pid
 * the fakes recorded and that still runs; the directories go after the file's tests.
 */
export const useChaos = (): (() => Chaos) => {
  const tempDir = useTempDirs()
  const started: Array<{
    readonly pid: number
    readonly exited: Promise<Exited>
    readonly done: () => boolean
  }> = []
  const sandboxes: Array<Chaos> = []

  afterEach(async () => {
    for (const proc of started.splice(0)) {
      if (!proc.done()) {
        signal(proc.pid, "SIGCONT")
        signal(proc.pid, "SIGKILL")
      }
      await within(`process ${proc.pid} to exit after SIGKILL`, proc.exited, 10_000)
    }
    for (const box of sandboxes.splice(0)) {
      const marks = [box.dir, path.join("fixtures", "bin", "fake-")]
      for (const effect of box.effects()) killIfOurs(effect.pid, marks)
      if (fs.existsSync(box.pidsDir))
        for (const name of fs.readdirSync(box.pidsDir).filter((file) => file.endsWith(".json"))) {
          const pids = decodePids(fs.readFileSync(path.join(box.pidsDir, name), "utf8"))
          killIfOurs(pids.child, marks)
          killIfOurs(pids.grandchild, marks)
        }
    }
  })

  return () => {
    const dir = tempDir()
    const root = path.join(dir, "root")
    const workDir = path.join(dir, "work")
    const logs = path.join(dir, "logs")
    const pidsDir = path.join(dir, "pids")
    for (const made of [workDir, logs, pidsDir]) fs.mkdirSync(made)
    const effectsFile = path.join(dir, "effects.jsonl")
    const inherited = Object.fromEntries(
      Object.entries(process.env).flatMap(([key, value]) =>
        value === undefined ||
        key.startsWith("RELAYKEEP_") ||
        key.startsWith("FAKE_") ||
        key === "XDG_DATA_HOME"
          ? []
          : [[key, value]]
      )
    )
    const env = {
      ...inherited,
      FAKE_SCENARIO: "scripted",
      FAKE_EFFECTS: effectsFile,
      FAKE_PIDS_DIR: pidsDir,
      FAKE_LIFETIME_MS: "60000"
    }

    const startWorker = (name: string, args: ReadonlyArray<string>): Started => {
      const stdoutFile = path.join(logs, `${name}.stdout`)
      const stderrFile = path.join(logs, `${name}.stderr`)
      const out = fs.openSync(stdoutFile, "w")
      const err = fs.openSync(stderrFile, "w")
      const child = spawn(
        process.execPath,
        [
          relaykeepBin,
          "worker",
          ...args,
          "--root",
          root,
          "--claude-executable",
          fakeClaude,
          "--work-dir",
          workDir,
          "--log-format",
          "json"
        ],
        { env, stdio: ["ignore", out, err] }
      )
      fs.closeSync(out)
      fs.closeSync(err)
      const pid = child.pid
      if (pid === undefined) throw new Error(`worker ${name} did not start`)
      let exit: Exited | undefined
      const exited = new Promise<Exited>((resolve) => {
        child.on("exit", (code, sig) => {
          exit = { code, signal: sig }
          resolve(exit)
        })
        child.on("error", () => {
          exit = { code: null, signal: null }
          resolve(exit)
        })
      })
      started.push({ pid, exited, done: () => exit !== undefined })
      const stdout = () => readText(stdoutFile)
      const stderr = () => readText(stderrFile)
      return {
        name,
        pid,
        exited,
        exit: () => exit,
        stdout,
        stderr,
        events: () =>
          readLines(stderrFile).flatMap((line) => {
            const decoded = decodeEvent(line)
            return decoded._tag === "Some" ? [decoded.value] : []
          }),
        summary: () => decodeSummary(stdout())
      }
    }

    const box: Chaos = {
      dir,
      root,
      workDir,
      effectsFile,
      pidsDir,
      env,
      startWorker,
      submit: (requests) => seedTasks(root, requests),
      record: (taskId) => {
        const file = recordPath(root, taskId)
        return fs.existsSync(file) ? decodeRecord(fs.readFileSync(file, "utf8")) : undefined
      },
      effects: () => readLines(effectsFile).map((line) => decodeEffect(line)),
      treePids: (taskId, attempt) => {
        const file = path.join(pidsDir, `${taskId}-${attempt}.json`)
        return fs.existsSync(file) ? decodePids(fs.readFileSync(file, "utf8")) : undefined
      }
    }
    sandboxes.push(box)
    return box
  }
}

/** The side effects of one task, as `event:attempt` strings in the order they happened. */
export const effectsOf = (effects: ReadonlyArray<SideEffect>, taskId: string): ReadonlyArray<string> =>
  effects.filter((effect) => effect.task_id === taskId).map((effect) => `${effect.event}:${effect.attempt}`)

/** What a worker said, for a failure message. */
export const logsOf = (...workers: ReadonlyArray<Started>): string =>
  workers
    .map(
      (worker) =>
        `--- ${worker.name} (pid ${worker.pid}) stderr:\n${worker.stderr()}\n--- stdout:\n${worker.stdout()}`
    )
    .join("\n")

/** The state letter of a process in /proc (R, S, D, T when stopped, Z), or undefined when it is gone. */
export const processState = (pid: number): string | undefined => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
  } catch {
    return undefined
  }
}

/**
 * SIGSTOP `pid` at a moment when it does not hold `lockFile`: a process stopped inside a
 * critical section would stall every other process on that lock until the lock expires.
 */
export const stopOutside = async (pid: number, lockFile: string): Promise<void> => {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    signal(pid, "SIGSTOP")
    await waitUntil(`process ${pid} to stop`, () => (processState(pid) === "T" ? true : undefined), 5_000)
    if (!fs.existsSync(lockFile)) return
    signal(pid, "SIGCONT")
    await delay(20)
  }
  throw new Error(`process ${pid} could not be stopped outside ${lockFile}`)
}

/**
 * Every running process (zombies aside) whose command line or environment names the sandbox:
 * the fakes and whatever they started inherit the sandbox's paths through their environment.
 * `except` are the pids a test expects to run (its workers).
 */
export const survivors = (box: Chaos, except: ReadonlyArray<number> = []): ReadonlyArray<string> =>
  fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((pid) => pid !== process.pid && !except.includes(pid))
    .flatMap((pid) => {
      try {
        const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8")
        const environ = fs.readFileSync(`/proc/${pid}/environ`, "utf8")
        return (cmdline.includes(box.dir) || environ.includes(box.dir)) && isRunning(pid)
          ? [`${pid}: ${cmdline.replaceAll("\0", " ")}`]
          : []
      } catch {
        return []
      }
    })

/** Continue a process (a no-op when it runs). */
export const continueProcess = (pid: number) => signal(pid, "SIGCONT")
export const terminate = (pid: number) => signal(pid, "SIGTERM")
