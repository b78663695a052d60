/**
 * The reliability features through the built binary, with real processes: `relaykeep recover`
 * after a worker was SIGKILLed or paused past its lease, the watching worker's flags, lifecycle
 * and output (JSON lines, text, a status line on a real terminal), cancelling a running task,
 * and what `read` shows of retries. The provider is fixtures/bin/fake-claude playing its
 * `scripted` scenario, which appends a line per start and end of a run to an effects file.
 */
import { afterEach, assert, beforeAll, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { ChildProcess } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { CancelOutcome, Receipt, TaskRecord, TaskView } from "../../src/domain/Task.js"
import { WorkerEventLine } from "../../src/domain/workerEvent.js"
import { PassReport } from "../../src/worker/pass.js"
import { ReapReport } from "../../src/worker/reap.js"
import { WatchSummary } from "../../src/worker/watch.js"
import type { RunResult } from "../support/cli.js"
import { jsonOutput, outputKeys, relaykeep, relaykeepBin } from "../support/cli.js"
import { fakeClaude, isRunning } from "../support/fakeCli.js"
import { recordPath, snapshotTree, useTempDirs } from "../support/files.js"
import { waitFor } from "../support/waitFor.js"

const tempDir = useTempDirs()

// ---------------------------------------------------------------------------------------------
// Sandboxes, spawned processes and their cleanup
// ---------------------------------------------------------------------------------------------

interface Box {
  readonly root: string
  readonly workDir: string
  /** Where the scripted fake appends {event, task_id, attempt, pid, at} lines. */
  readonly effects: string
  readonly dir: string
}

const boxes: Array<Box> = []
const children: Array<ChildProcess> = []

const newBox = (): Box => {
  const dir = tempDir()
  const workDir = path.join(dir, "work")
  fs.mkdirSync(workDir)
  const box = { root: path.join(dir, "root"), workDir, effects: path.join(dir, "effects.jsonl"), dir }
  boxes.push(box)
  return box
}

const FakeEffect = Schema.parseJson(
  Schema.Struct({
    event: Schema.Literal("start", "done"),
    task_id: Schema.NullOr(Schema.String),
    attempt: Schema.Int,
    pid: Schema.Int,
    at: Schema.Number
  })
)
type FakeEffect = typeof FakeEffect.Type

const effectsOf = (box: Box): ReadonlyArray<FakeEffect> =>
  fs.existsSync(box.effects)
    ? fs
        .readFileSync(box.effects, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => Schema.decodeUnknownSync(FakeEffect)(line))
    : []

/** SIGKILL `pid` if it still runs the fake provider (its command line names it), never another process. */
const killFake = (pid: number) => {
  if (!isRunning(pid)) return
  try {
    if (!fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("fake-claude")) return
    process.kill(pid, "SIGKILL")
  } catch {
    // Gone meanwhile.
  }
}

const exitOf = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("close", () => resolve())
  })

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      // A paused worker must be woken to die cleanly; SIGKILL works on stopped processes anyway.
      child.kill("SIGKILL")
    }
    await exitOf(child)
  }
  // A SIGKILLed worker leaves its provider running (it has its own process group).
  for (const box of boxes.splice(0)) for (const effect of effectsOf(box)) killFake(effect.pid)
})

/** Where `#!/usr/bin/env node` finds node. */
const pathWithNode = `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`

const workerEnv = (box: Box): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env["RELAYKEEP_ROOT"]
  delete env["XDG_DATA_HOME"]
  return {
    ...env,
    PATH: pathWithNode,
    SHELL: "/bin/sh",
    FAKE_SCENARIO: "scripted",
    FAKE_EFFECTS: box.effects,
    FAKE_PIDS_DIR: box.dir,
    FAKE_LIFETIME_MS: "60000"
  }
}

interface Spawned {
  readonly pid: number
  readonly stdout: () => string
  readonly stderr: () => string
  readonly exited: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

/** Start a process whose output is captured, killed after the test if it still runs. */
const start = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Spawned => {
  const child = spawn(command, args, { env, stdio: ["pipe", "pipe", "pipe"] })
  children.push(child)
  const stdout: Array<Buffer> = []
  const stderr: Array<Buffer> = []
  child.stdout?.on("data", (chunk: Buffer) => stdout.push(chunk))
  child.stderr?.on("data", (chunk: Buffer) => stderr.push(chunk))
  child.stdin?.on("error", () => undefined)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (code, signal) => resolve({ code, signal }))
  })
  const pid = child.pid
  if (pid === undefined) throw new Error(`${command} did not start`)
  return {
    pid,
    stdout: () => Buffer.concat(stdout).toString("utf8"),
    stderr: () => Buffer.concat(stderr).toString("utf8"),
    exited
  }
}

const workerArgs = (box: Box, extra: ReadonlyArray<string>): ReadonlyArray<string> => [
  relaykeepBin,
  "worker",
  "--watch",
  "--root",
  box.root,
  "--claude-executable",
  fakeClaude,
  "--work-dir",
  box.workDir,
  "--kill-grace",
  "2s",
  ...extra
]

/** `relaykeep worker --watch` on the box's root, with the scripted fake as claude. */
const startWorker = (box: Box, extra: ReadonlyArray<string>): Spawned =>
  start(process.execPath, workerArgs(box, extra), workerEnv(box))

/** What a stalled wait should show: the worker's process state, the index and the records' states. */
const diagnose = (box: Box, pid: number): string => {
  const safe = (read: () => string) => {
    try {
      return read()
    } catch (error) {
      return String(error)
    }
  }
  const stat = safe(() => fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(" ").slice(2, 3).join(""))
  const index = safe(() =>
    ["queued", "running"]
      .map((dir) => `${dir}: ${fs.readdirSync(path.join(box.root, "index", dir)).join(",")}`)
      .join("; ")
  )
  const locks = safe(() => fs.readdirSync(path.join(box.root, "locks")).join(","))
  const records = safe(() =>
    fs
      .readdirSync(path.join(box.root, "tasks"))
      .map(
        (name) =>
          `${name.slice(0, 8)}: ${fs.readFileSync(path.join(box.root, "tasks", name), "utf8").slice(0, 400)}`
      )
      .join(" | ")
  )
  return `worker state ${stat}; index ${index}; locks ${locks}; records ${records}; effects ${safe(() => JSON.stringify(effectsOf(box)))}`
}

const isJson = (line: string): boolean => {
  try {
    JSON.parse(line)
    return true
  } catch {
    return false
  }
}

const lines = (text: string): ReadonlyArray<string> => text.split("\n").filter((line) => line !== "")

// ---------------------------------------------------------------------------------------------
// What the worker prints
// ---------------------------------------------------------------------------------------------

// The worker's own schema of its stream: what it prints must decode as exactly one event.
const decodeEvent = Schema.decodeUnknownSync(Schema.parseJson(WorkerEventLine), { onExcessProperty: "error" })

/** Every line of a JSON-format stderr, each decoded as exactly one event (throws on any other line). */
const jsonEvents = (stderr: string): ReadonlyArray<WorkerEventLine> => {
  assert.isTrue(stderr === "" || stderr.endsWith("\n"), "stderr ends with a newline")
  return lines(stderr).map((line, i) => {
    try {
      return decodeEvent(line)
    } catch (error) {
      const reason = error instanceof Error ? (error.message.split("\n").at(-1) ?? "") : ""
      throw new Error(
        `stderr line ${i + 1} is not one JSON event: ${JSON.stringify(line)} (${reason.trim()})`
      )
    }
  })
}

/** The events decoded so far, skipping lines that are not events (for waiting, not asserting). */
const eventsSoFar = (stderr: string): ReadonlyArray<WorkerEventLine> =>
  lines(stderr).flatMap((line) => {
    try {
      return [decodeEvent(line)]
    } catch {
      return []
    }
  })

const waitForEvent = <A extends WorkerEventLine>(
  worker: Spawned,
  what: string,
  match: (event: WorkerEventLine) => event is A,
  timeoutMillis = 120_000
): Promise<A> =>
  waitFor(
    () => `${what} (stderr so far: ${worker.stderr().slice(-2000)})`,
    () => eventsSoFar(worker.stderr()).find(match),
    timeoutMillis
  )

type EventOf<K extends WorkerEventLine["event"]> = Extract<WorkerEventLine, { readonly event: K }>
const isStarted = (event: WorkerEventLine): event is EventOf<"started"> => event.event === "started"
const finishedOf =
  (taskId: string, attempt: number) =>
  (event: WorkerEventLine): event is EventOf<"finished"> =>
    event.event === "finished" && event.task_id === taskId && event.attempt === attempt
const claimedOf =
  (taskId: string) =>
  (event: WorkerEventLine): event is EventOf<"claimed"> =>
    event.event === "claimed" && event.task_id === taskId

/** SIGINT, then the exit: code 0 and one WatchSummary line on stdout. */
const stopWorker = async (worker: Spawned): Promise<WatchSummary> => {
  process.kill(worker.pid, "SIGINT")
  const exit = await worker.exited
  assert.strictEqual(exit.code, 0, `exit after SIGINT (signal ${exit.signal}); stderr: ${worker.stderr()}`)
  assert.match(worker.stdout(), /^[^\n]+\n$/, "stdout is one line")
  return Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })(
    worker.stdout()
  )
}

const summary = (counts: Partial<Omit<WatchSummary, "reason">>): WatchSummary => ({
  reason: "SIGINT",
  finished: 0,
  failed: 0,
  retried: 0,
  cancelled: 0,
  released: 0,
  reaped: 0,
  ...counts
})

// ---------------------------------------------------------------------------------------------
// The CLI around it
// ---------------------------------------------------------------------------------------------

/** A payload for the scripted fake: the plan travels as the prompt. */
const scripted = (plan: {
  readonly sleep_ms?: number
  readonly fail_attempts?: number
}): Record<string, unknown> => ({
  provider: "claude",
  model: "sonnet",
  prompt: JSON.stringify(plan)
})

const submit = async (root: string, id: string, payload: Record<string, unknown>): Promise<Receipt> =>
  jsonOutput(
    Receipt,
    await relaykeep(["submit", "--root", root, "--id", id, "--payload", JSON.stringify(payload)])
  )

const receiptArgs = (root: string, receipt: Receipt) => [
  "--root",
  root,
  "--task-id",
  receipt.task_id,
  "--sha",
  receipt.payload_sha256
]

const read = async (root: string, receipt: Receipt): Promise<TaskView> =>
  jsonOutput(TaskView, await relaykeep(["read", ...receiptArgs(root, receipt)]))

const cancel = async (root: string, receipt: Receipt): Promise<CancelOutcome> =>
  jsonOutput(CancelOutcome, await relaykeep(["cancel", ...receiptArgs(root, receipt)]))

/** The record file as the file store wrote it: a TaskRecord and nothing else but its revision. */
const StoredRecordFile = Schema.extend(TaskRecord, Schema.Struct({ revision: Schema.NonNegativeInt }))
const rawRecord = (root: string, receipt: Receipt): TaskRecord => {
  const { revision: _revision, ...record } = Schema.decodeUnknownSync(Schema.parseJson(StoredRecordFile), {
    onExcessProperty: "error"
  })(fs.readFileSync(recordPath(root, receipt.task_id), "utf8"))
  return record
}

/**
 * `recover`'s answer: exit 0, one JSON line. A reap is also logged on stderr (Effect's logger),
 * so stderr is only checked for failures.
 */
const recoverOutput = (result: RunResult): ReapReport => {
  assert.strictEqual(result.code, 0, `recover exit code (stderr: ${result.stderr})`)
  assert.notMatch(result.stderr, /Error|Defect|failure/, "recover reports no failure")
  assert.match(result.stdout, /^[^\n]+\n$/, "stdout is one line")
  return Schema.decodeUnknownSync(Schema.parseJson(ReapReport), { onExcessProperty: "error" })(result.stdout)
}

const nothingToDo: ReapReport = { reaped: [], left_alone: [], live: [], invalid_records: [] }

const millis = (time: string | null): number => {
  assert.isNotNull(time)
  return Date.parse(time ?? "")
}

/** The result text the scripted fake answers with. */
const ScriptedAnswer = Schema.parseJson(Schema.Struct({ task_id: Schema.String, attempt: Schema.Int }))
const ClaudeResult = Schema.Struct({ provider: Schema.Literal("claude"), text: Schema.String })
const answerOf = (result: unknown) =>
  Schema.decodeUnknownSync(ScriptedAnswer)(Schema.decodeUnknownSync(ClaudeResult)(result).text)

/**
 * Make a real orphan: a watching worker claims a long task, starts the fake provider and notes
 * its process group on the attempt; the worker is then SIGKILLed (after `whileAlive`, if
 * given). Its provider runs on in its own process group, for a reaper to stop.
 */
const orphan = async (
  box: Box,
  id: string,
  plan: { readonly sleep_ms: number; readonly fail_attempts?: number },
  extra: ReadonlyArray<string>,
  whileAlive?: (receipt: Receipt) => Promise<void>
) => {
  const receipt = await submit(box.root, id, scripted(plan))
  const worker = startWorker(box, ["--log-format", "json", ...extra])
  const started = await waitForEvent(worker, "the worker to start", isStarted)
  const provider = await waitFor("the fake provider to start", () =>
    effectsOf(box).find((effect) => effect.event === "start" && effect.task_id === receipt.task_id)
  )
  await waitFor(
    "the provider's process group on the record",
    () => rawRecord(box.root, receipt).attempts[0]?.process_group
  )
  if (whileAlive !== undefined) await whileAlive(receipt)
  process.kill(worker.pid, "SIGKILL")
  assert.strictEqual((await worker.exited).signal, "SIGKILL")
  assert.isTrue(isRunning(provider.pid), "the provider outlives its worker")
  return { receipt, workerPid: worker.pid, workerId: started.worker_id, providerPid: provider.pid }
}

/** The reaper stopped the lost provider: it is gone, and it never finished its work. */
const providerStopped = async (box: Box, providerPid: number) => {
  await waitFor("the lost provider to be gone", () => (isRunning(providerPid) ? undefined : true), 60_000)
  assert.isFalse(
    effectsOf(box).some((effect) => effect.event === "done" && effect.pid === providerPid),
    "the lost provider was stopped before it finished"
  )
}

// ---------------------------------------------------------------------------------------------

/** Whether `pid` has exited: gone, or a zombie waiting for its (paused) parent. */
const exitedOrZombie = (pid: number): boolean => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")
  } catch {
    return true
  }
}

describe("relaykeep recover", { timeout: 300_000 }, () => {
  it("on a fresh root and on an empty one: empty lists, exit 0, nothing on stderr", async () => {
    const root = path.join(tempDir(), "fresh")
    assert.deepStrictEqual(jsonOutput(ReapReport, await relaykeep(["recover", "--root", root])), nothingToDo)
    assert.isTrue(fs.existsSync(root), "the root was opened")
    assert.deepStrictEqual(jsonOutput(ReapReport, await relaykeep(["recover", "--root", root])), nothingToDo)
  })

  it("a SIGKILLed worker's task: owner_dead, failed as worker_lost under the default single attempt, its provider stopped; a second recover finds nothing", async () => {
    const box = newBox()
    const { receipt, workerPid, workerId, providerPid } = await orphan(
      box,
      "lost-once",
      { sleep_ms: 60_000 },
      [],
      async (r) => {
        // While its worker lives, the task is left alone and reported live.
        assert.deepStrictEqual(recoverOutput(await relaykeep(["recover", "--root", box.root])), {
          ...nothingToDo,
          live: [r.task_id]
        })
      }
    )

    // The dead worker's task still reads as running, with its lease, until someone reaps it.
    const before = rawRecord(box.root, receipt)
    assert.strictEqual(before.state, "running")
    assert.strictEqual(before.lease?.pid, workerPid)
    assert.strictEqual(before.attempts[0]?.process_group, providerPid, "the provider leads its own group")
    assert.deepStrictEqual(before.retry, {
      max_attempts: 1,
      backoff_initial_ms: 10_000,
      backoff_max_ms: 600_000
    })
    assert.strictEqual((await read(box.root, receipt)).state, "running")

    const report = recoverOutput(await relaykeep(["recover", "--root", box.root]))
    assert.deepStrictEqual(report, {
      reaped: [
        {
          task_id: receipt.task_id,
          reason: "owner_dead",
          attempt: 1,
          worker_id: workerId,
          expires_at: before.lease?.expires_at ?? "",
          state: "failed",
          stopped_process_group: providerPid
        }
      ],
      left_alone: [],
      live: [],
      invalid_records: []
    })

    const view = await read(box.root, receipt)
    assert.strictEqual(view.state, "failed")
    assert.strictEqual(view.error?.tag, "worker_lost")
    assert.strictEqual(view.error?.retryable, true)
    assert.include(view.error?.message ?? "", `pid ${workerPid}`)
    assert.include(view.error?.message ?? "", "its process is gone")
    assert.strictEqual(view.attempt, 1)
    assert.strictEqual(view.max_attempts, 1)
    assert.isNull(view.not_before)
    assert.isNull(view.cancel_requested_at)
    assert.isNull(view.result)
    assert.isNotNull(view.finished_at)
    await providerStopped(box, providerPid)
    // The attempt's history is kept: who ran it, when, and how it ended.
    assert.strictEqual(view.attempts.length, 1)
    const [attempt] = view.attempts
    assert.strictEqual(attempt?.attempt, 1)
    assert.strictEqual(attempt?.pid, workerPid)
    assert.strictEqual(attempt?.worker_id, workerId)
    assert.strictEqual(attempt?.started_at, before.attempts[0]?.started_at)
    assert.strictEqual(attempt?.ended_at, view.finished_at)
    assert.strictEqual(attempt?.outcome, "failed")
    assert.deepStrictEqual(attempt?.error, view.error)
    assert.isUndefined(attempt?.late)

    const bytes = fs.readFileSync(recordPath(box.root, receipt.task_id))
    assert.deepStrictEqual(
      jsonOutput(ReapReport, await relaykeep(["recover", "--root", box.root])),
      nothingToDo
    )
    assert.deepStrictEqual(
      fs.readFileSync(recordPath(box.root, receipt.task_id)),
      bytes,
      "the record is untouched"
    )
  })

  it("under a worker started with --max-attempts 2 the same task goes back to the queue, with the claim's backoff; the next attempt's error joins the history", async () => {
    const box = newBox()
    // Attempt 1 is lost; attempt 2 fails on its own (exit 3, retryable) after 8 s. (Whether the
    // lost provider is still there to be stopped depends on how soon recover runs: not checked.)
    const { receipt, workerPid } = await orphan(box, "lost-twice", { sleep_ms: 8_000, fail_attempts: 2 }, [
      "--max-attempts",
      "2",
      "--retry-backoff",
      "2s"
    ])
    assert.deepStrictEqual(rawRecord(box.root, receipt).retry, {
      max_attempts: 2,
      backoff_initial_ms: 2_000,
      backoff_max_ms: 600_000
    })

    const report = recoverOutput(await relaykeep(["recover", "--root", box.root]))
    assert.deepStrictEqual(
      report.reaped.map(({ task_id, reason, attempt, state }) => ({ task_id, reason, attempt, state })),
      [{ task_id: receipt.task_id, reason: "owner_dead", attempt: 1, state: "queued" }]
    )

    const queued = await read(box.root, receipt)
    assert.strictEqual(queued.state, "queued")
    assert.strictEqual(queued.attempt, 1)
    assert.strictEqual(queued.max_attempts, 2)
    assert.isNull(queued.error)
    assert.isNull(queued.finished_at)
    const [lost] = queued.attempts
    assert.strictEqual(queued.attempts.length, 1)
    assert.strictEqual(lost?.outcome, "failed")
    assert.strictEqual(lost?.error?.tag, "worker_lost")
    assert.strictEqual(lost?.pid, workerPid)
    // Equal jitter on the stamped 2 s: the wait is between 1 s and 2 s after the attempt ended.
    const wait = millis(queued.not_before) - millis(lost?.ended_at ?? null)
    assert.isAtLeast(wait, 1_000, `not_before ${queued.not_before}`)
    assert.isAtMost(wait, 2_000, `not_before ${queued.not_before}`)

    assert.deepStrictEqual(
      jsonOutput(ReapReport, await relaykeep(["recover", "--root", box.root])),
      nothingToDo
    )

    // A new worker waits out the backoff, runs attempt 2, which fails for good.
    const worker = startWorker(box, ["--log-format", "json", "--max-attempts", "2"])
    const second = await waitForEvent(worker, "attempt 2 to end", finishedOf(receipt.task_id, 2))
    assert.strictEqual(second.outcome, "failed")
    assert.strictEqual(second.requeued, false)
    assert.deepStrictEqual(await stopWorker(worker), summary({ failed: 1 }))

    const failed = await read(box.root, receipt)
    assert.strictEqual(failed.state, "failed")
    assert.strictEqual(failed.attempt, 2)
    assert.strictEqual(failed.error?.tag, "ProviderFailed")
    assert.deepStrictEqual(
      failed.attempts.map((attempt) => [attempt.attempt, attempt.outcome, attempt.error?.tag]),
      [
        [1, "failed", "worker_lost"],
        [2, "failed", "ProviderFailed"]
      ]
    )
    assert.include(failed.attempts[1]?.error?.stderr_tail ?? "", "scripted failure of attempt 2")
    assert.isAtLeast(millis(failed.attempts[1]?.started_at ?? null), millis(queued.not_before))
  })

  it("a worker paused past its lease: recover reaps it as lease_expired; what it reports afterwards is kept as late, not as the result", async () => {
    const box = newBox()
    // The provider finishes (3 s) while its worker is paused, after the worker's 2 s lease ran out.
    const receipt = await submit(box.root, "paused", scripted({ sleep_ms: 3_000 }))
    const worker = startWorker(box, ["--log-format", "text", "--lease", "2s"])
    const provider = await waitFor("the fake provider to start", () =>
      effectsOf(box).find((effect) => effect.event === "start" && effect.task_id === receipt.task_id)
    )
    await pauseOutsideLocks(worker.pid, box.root)
    assert.strictEqual(
      rawRecord(box.root, receipt).state,
      "running",
      "paused before it could record an outcome"
    )
    await waitFor("the provider to finish", () =>
      effectsOf(box).find((effect) => effect.event === "done" && effect.pid === provider.pid)
    )
    // "done" is recorded just before the answer is written: wait until the process has exited (a
    // zombie, since its parent is paused), or recover would rightly stop it as a lost attempt's.
    await waitFor("the provider to exit", () => (exitedOrZombie(provider.pid) ? true : undefined))

    const reaped = await waitFor("the lease to expire and recover to reap it", async () => {
      const report = recoverOutput(await relaykeep(["recover", "--root", box.root]))
      return report.reaped.length > 0 ? report : undefined
    })
    // Its provider had already exited: no process group was left to stop.
    assert.deepStrictEqual(
      reaped.reaped.map(({ task_id, reason, state, stopped_process_group }) => ({
        task_id,
        reason,
        state,
        stopped_process_group
      })),
      [
        {
          task_id: receipt.task_id,
          reason: "lease_expired",
          state: "failed",
          stopped_process_group: undefined
        }
      ]
    )
    process.kill(worker.pid, "SIGCONT")
    await waitFor(
      () => `the worker to see its attempt was taken (stderr: ${worker.stderr()})`,
      () => (worker.stderr().includes(`stale ${receipt.task_id} attempt 1`) ? true : undefined)
    )
    assert.deepStrictEqual(await stopWorker(worker), summary({}))

    const view = await read(box.root, receipt)
    assert.strictEqual(view.state, "failed")
    assert.isNull(view.result, "a late result is not the task's result")
    assert.strictEqual(view.error?.tag, "worker_lost")
    assert.include(view.error?.message ?? "", "its lease expired")
    const [attempt] = view.attempts
    assert.strictEqual(view.attempts.length, 1)
    assert.strictEqual(attempt?.outcome, "failed")
    assert.strictEqual(attempt?.error?.tag, "worker_lost")
    assert.strictEqual(attempt?.late?.outcome, "complete")
    assert.deepStrictEqual(answerOf(attempt?.late?.result), { task_id: receipt.task_id, attempt: 1 })
    assert.isAtLeast(millis(attempt?.late?.reported_at ?? null), millis(attempt?.ended_at ?? null))
  })
})

/** All threads of `pid` are stopped (state T in /proc). */
const stopped = (pid: number): boolean =>
  fs.readdirSync(`/proc/${pid}/task`).every((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "T"
  })

/**
 * SIGSTOP `pid` at a moment it holds no lock under `root`: a pause inside a critical section
 * would stall every other process on that task's lock for the lock's 30 s lifetime.
 */
const pauseOutsideLocks = async (pid: number, root: string) => {
  const locks = path.join(root, "locks")
  const holdsLock = () =>
    fs.readdirSync(locks).some((name) => {
      try {
        return fs.readFileSync(path.join(locks, name), "utf8").includes(`"pid":${pid}`)
      } catch {
        return false
      }
    })
  for (let tries = 0; tries < 50; tries++) {
    process.kill(pid, "SIGSTOP")
    await waitFor("the worker to stop", () => (stopped(pid) ? true : undefined), 10_000)
    if (!holdsLock()) return
    process.kill(pid, "SIGCONT")
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error("the worker always held a lock when paused")
}

// ---------------------------------------------------------------------------------------------

/** A worker started with bad flags; if it does not exit by itself it is killed (a guard). */
const runBadWorker = async (root: string, args: ReadonlyArray<string>) => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  delete env["RELAYKEEP_ROOT"]
  delete env["XDG_DATA_HOME"]
  const worker = start(process.execPath, [relaykeepBin, "worker", "--root", root, ...args], env)
  const guard = setTimeout(() => process.kill(worker.pid, "SIGKILL"), 90_000)
  const exit = await worker.exited
  clearTimeout(guard)
  return { ...exit, stdout: worker.stdout(), stderr: worker.stderr() }
}

const badFlags: ReadonlyArray<{
  readonly flag: string
  readonly args: ReadonlyArray<string>
  /** Checked by the command after the options parsed, rather than by the parser. */
  readonly afterParsing?: boolean
}> = [
  { flag: "--concurrency", args: ["--concurrency", "0"] },
  { flag: "--max-attempts", args: ["--max-attempts", "0"] },
  { flag: "--max-per-provider", args: ["--max-per-provider", "claude"] },
  { flag: "--max-per-provider", args: ["--max-per-provider", "claude=0"] },
  { flag: "--max-per-provider", args: ["--max-per-provider", "=1"] },
  {
    flag: "--retry-backoff-max",
    args: ["--retry-backoff", "10s", "--retry-backoff-max", "5s"],
    afterParsing: true
  },
  { flag: "--log-format", args: ["--log-format", "xml"] },
  { flag: "--grace", args: ["--grace", "nonsense"] },
  { flag: "--worker-id", args: ["--worker-id", ""] },
  { flag: "--worker-id", args: ["--worker-id", "w".repeat(513)] }
]

describe("relaykeep worker: bad flags", { timeout: 300_000 }, () => {
  /** A root with a queued task, so that a worker that wrongly went ahead would change it. */
  let root = ""
  beforeAll(async () => {
    root = path.join(tempDir(), "root")
    await submit(root, "waiting", { job: 1 })
  })

  const checkRejected = async (
    flag: string,
    result: Awaited<ReturnType<typeof runBadWorker>>
  ): Promise<void> => {
    assert.strictEqual(
      result.code,
      2,
      `exit code (signal ${result.signal}; stdout ${result.stdout}; stderr ${result.stderr})`
    )
    assert.strictEqual(result.stdout, "", "nothing on stdout")
    assert.match(result.stderr, /^[^\n]+\n$/, "one line on stderr")
    assert.include(result.stderr, flag, "the line names the flag")
  }

  for (const { flag, args } of badFlags) {
    // A long value is named by its length: the whole of it would bury the test's name.
    const shown = args.map((arg) => (arg.length > 40 ? `<${arg.length} characters>` : arg)).join(" ")
    it(`--watch ${shown}: exit 2, one line naming ${flag}, nothing created or changed`, async () => {
      const before = snapshotTree(root)
      const fresh = path.join(tempDir(), "fresh")
      const [existing, unopened] = await Promise.all([
        runBadWorker(root, ["--watch", ...args]),
        runBadWorker(fresh, ["--watch", ...args])
      ])
      await checkRejected(flag, existing)
      await checkRejected(flag, unopened)
      assert.deepStrictEqual(snapshotTree(root), before, "nothing under the root changed")
      assert.isFalse(fs.existsSync(fresh), "no root was created")
    })
  }

  // Checked after parsing, in the command itself: the same answer without --watch.
  for (const { flag, args } of badFlags.filter((bad) => bad.afterParsing)) {
    it(`(one pass) ${args.join(" ")}: exit 2, one line naming ${flag}, nothing changed`, async () => {
      const before = snapshotTree(root)
      await checkRejected(flag, await runBadWorker(root, args))
      assert.deepStrictEqual(snapshotTree(root), before, "nothing under the root changed")
    })
  }
})

// ---------------------------------------------------------------------------------------------

describe("relaykeep worker --watch", { timeout: 300_000 }, () => {
  it("--log-format json: wakes on a submission long before the poll, SIGINT ends it with exit 0, one summary on stdout, one event per stderr line", async () => {
    const box = newBox()
    const first = await submit(box.root, "before-start", scripted({ sleep_ms: 100 }))
    // The poll is 10 minutes away: nothing but a wake-up can explain a pickup within a minute,
    // however slowly a loaded machine starts the processes.
    const worker = startWorker(box, ["--log-format", "json", "--poll", "10m"])
    await waitForEvent(worker, "the first task to finish", finishedOf(first.task_id, 1))

    const later = await submit(box.root, "after-start", scripted({ sleep_ms: 100 }))
    await waitForEvent(worker, "the later task to be claimed long before the poll", claimedOf(later.task_id))
    await waitForEvent(worker, "the later task to finish", finishedOf(later.task_id, 1))

    assert.deepStrictEqual(await stopWorker(worker), summary({ finished: 2 }))
    const events = jsonEvents(worker.stderr())
    assert.deepStrictEqual(
      events.map((event) =>
        event.event === "claimed" || event.event === "finished"
          ? `${event.event} ${event.task_id === first.task_id ? "first" : "later"}`
          : event.event
      ),
      ["started", "claimed first", "finished first", "claimed later", "finished later", "stopping", "stopped"]
    )
    const started = events.find(isStarted)
    assert.deepStrictEqual(started === undefined ? undefined : { ...started, time: "" }, {
      time: "",
      event: "started",
      worker_id: `${os.hostname()}:${worker.pid}`,
      pid: worker.pid,
      concurrency: 2,
      max_per_provider: {},
      max_attempts: 1
    })
    for (const event of events) {
      if (event.event === "finished") assert.strictEqual(event.outcome, "complete")
      assert.isFalse(Number.isNaN(Date.parse(event.time)), `time of ${event.event}`)
    }
    assert.strictEqual((await read(box.root, later)).state, "complete")
  })

  it("--log-format json: a reap at start is an event like any other, and stderr carries nothing but events", async () => {
    const box = newBox()
    const { receipt } = await orphan(box, "orphan", { sleep_ms: 60_000 }, [])
    const worker = startWorker(box, ["--log-format", "json"])
    await waitFor(
      () => `the reap (stderr: ${worker.stderr()})`,
      () => (worker.stderr().includes(`"event":"reaped"`) ? true : undefined)
    )
    assert.deepStrictEqual(await stopWorker(worker), summary({ reaped: 1 }))
    const reaped = jsonEvents(worker.stderr()).filter((event) => event.event === "reaped")
    assert.deepStrictEqual(
      reaped.map((event) => ({ ...event, time: "" })),
      [
        {
          time: "",
          event: "reaped",
          task_id: receipt.task_id,
          attempt: 1,
          reason: "owner_dead",
          state: "failed"
        }
      ]
    )
  })

  it("--log-format text: one readable line per event, no JSON, no terminal codes", async () => {
    const box = newBox()
    const task = await submit(box.root, "text", scripted({ sleep_ms: 100 }))
    const worker = startWorker(box, [
      "--log-format",
      "text",
      "--concurrency",
      "3",
      "--max-per-provider",
      "claude=1"
    ])
    await waitFor(
      () => `the task to finish (stderr: ${worker.stderr()}; ${diagnose(box, worker.pid)})`,
      () => (worker.stderr().includes(`complete ${task.task_id} attempt 1 in `) ? true : undefined)
    )
    assert.deepStrictEqual(await stopWorker(worker), summary({ finished: 1 }))
    const stderr = worker.stderr()
    assert.notInclude(stderr, "\u001b", "no escape sequences")
    const shown = lines(stderr)
    for (const line of shown) {
      assert.match(line, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \S/, `a timestamped line: ${line}`)
      assert.isFalse(isJson(line), `not JSON: ${line}`)
    }
    const text = shown.map((line) => line.slice(25))
    assert.deepStrictEqual(
      text.map((line) => line.replace(/ in \d+ ms$/, " in N ms")),
      [
        `worker ${os.hostname()}:${worker.pid} (pid ${worker.pid}) watching: concurrency 3, max attempts 1, claude ≤ 1`,
        `claimed ${task.task_id} attempt 1 (claude)`,
        `complete ${task.task_id} attempt 1 in N ms`,
        "stopping (SIGINT): 0 running, up to 30000 ms to finish",
        "stopped (SIGINT): 1 finished, 0 failed, 0 released"
      ]
    )
  })

  /** `relaykeep worker --watch ...` on a pseudo-terminal (util-linux script), its pid in a file. */
  const onTerminal = (box: Box, extra: ReadonlyArray<string>) => {
    const pidFile = path.join(box.dir, "worker.pid")
    const quote = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`
    const command = `echo $$ > ${quote(pidFile)}; exec ${[process.execPath, ...workerArgs(box, extra)].map(quote).join(" ")}`
    const script = start("/usr/bin/script", ["-qfec", command, "/dev/null"], workerEnv(box))
    const pid = waitFor("the worker's pid", () =>
      fs.existsSync(pidFile) && /^\d+\n$/.test(fs.readFileSync(pidFile, "utf8"))
        ? Number(fs.readFileSync(pidFile, "utf8"))
        : undefined
    )
    return { script, pid }
  }

  /** What the terminal showed, once the worker stopped on SIGINT and script passed on its exit code. */
  const stopOnTerminal = async (script: Spawned, pid: number): Promise<string> => {
    process.kill(pid, "SIGINT")
    const exit = await script.exited
    assert.strictEqual(exit.code, 0, `the worker's exit code through script (output: ${script.stdout()})`)
    return script.stdout()
  }

  it("on a terminal: a live status line drawn with the clear-line sequence, then the summary", async () => {
    const box = newBox()
    const task = await submit(box.root, "tty", scripted({ sleep_ms: 100 }))
    const { script, pid } = onTerminal(box, ["--poll", "30s"])
    const status = "running 0 · queued 0 · finished 1 · failed 0"
    await waitFor(`the status line after the task (output: ${JSON.stringify(script.stdout())})`, () =>
      script.stdout().includes(status) ? true : undefined
    )
    const output = await stopOnTerminal(script, await pid)
    assert.include(output, `\r\u001b[2K${status}`, "the status line replaces the current line")
    // Each event line also starts by clearing the status line it is written over.
    assert.isTrue(
      output
        .split("\r\u001b[2K")
        .some((part) => new RegExp(`^\\S+ claimed ${task.task_id} attempt 1 \\(claude\\)\\r?\\n`).test(part)),
      "the claim is written over the status line"
    )
    assert.include(output, `complete ${task.task_id} attempt 1 in `)
    assert.match(output, /running \d+ · queued \d+ · finished \d+ · failed \d+/)
    const summaryLine = output
      .split(/\r?\n/)
      .filter((line) => line.startsWith("{"))
      .at(-1)
    assert.deepStrictEqual(
      Schema.decodeUnknownSync(Schema.parseJson(WatchSummary))(summaryLine),
      summary({ finished: 1 })
    )
  })

  it("on a terminal with --log-format json: still one JSON object per line, no status line", async () => {
    const box = newBox()
    const task = await submit(box.root, "tty-json", scripted({ sleep_ms: 100 }))
    const { script, pid } = onTerminal(box, ["--log-format", "json", "--poll", "30s"])
    await waitFor(`the task to finish (output: ${JSON.stringify(script.stdout())})`, () =>
      script.stdout().includes(`"event":"finished"`) ? true : undefined
    )
    const output = await stopOnTerminal(script, await pid)
    assert.notInclude(output, "\u001b", "no escape sequences")
    assert.notMatch(output, /running \d+ · queued/)
    const shown = output.split(/\r?\n/).filter((line) => line !== "")
    const summaryLine = shown.at(-1)
    assert.deepStrictEqual(
      Schema.decodeUnknownSync(Schema.parseJson(WatchSummary))(summaryLine),
      summary({ finished: 1 })
    )
    const events = jsonEvents(
      shown
        .slice(0, -1)
        .map((line) => `${line}\n`)
        .join("")
    )
    assert.deepStrictEqual(
      events.map((event) => event.event),
      ["started", "claimed", "finished", "stopping", "stopped"]
    )
    assert.isTrue(events.some((event) => event.event === "finished" && event.task_id === task.task_id))
  })
})

// ---------------------------------------------------------------------------------------------

describe("relaykeep cancel on a running task", { timeout: 300_000 }, () => {
  it("asks the worker, which stops the provider and records cancelled; cancelling again or a complete task changes nothing", async () => {
    const box = newBox()
    const long = await submit(box.root, "long", scripted({ sleep_ms: 60_000 }))
    const worker = startWorker(box, ["--log-format", "json"])
    const provider = await waitFor("the fake provider to start", () =>
      effectsOf(box).find((effect) => effect.event === "start" && effect.task_id === long.task_id)
    )

    assert.deepStrictEqual(await cancel(box.root, long), {
      task_id: long.task_id,
      cancelled: false,
      cancel_requested: true,
      state: "running"
    })
    const requested = rawRecord(box.root, long).cancel_requested_at
    assert.isDefined(requested, "the request is on the record")

    const cancelled = await waitFor(
      "the task to read as cancelled",
      async () => {
        const view = await read(box.root, long)
        return view.state === "cancelled" ? view : undefined
      },
      60_000
    )
    assert.strictEqual(cancelled.cancel_requested_at, requested)
    assert.isNull(cancelled.result)
    assert.isNull(cancelled.error)
    assert.isNotNull(cancelled.finished_at)
    assert.deepStrictEqual(
      cancelled.attempts.map((attempt) => [attempt.attempt, attempt.outcome]),
      [[1, "cancelled"]]
    )
    await waitFor("the provider to be stopped", () => (isRunning(provider.pid) ? undefined : true), 60_000)
    assert.isFalse(
      effectsOf(box).some((effect) => effect.event === "done"),
      "the provider never finished"
    )
    const finished = await waitForEvent(worker, "the attempt's end", finishedOf(long.task_id, 1))
    assert.strictEqual(finished.outcome, "cancelled")

    const cancelledBytes = fs.readFileSync(recordPath(box.root, long.task_id))
    assert.deepStrictEqual(await cancel(box.root, long), {
      task_id: long.task_id,
      cancelled: true,
      cancel_requested: false,
      state: "cancelled"
    })
    assert.deepStrictEqual(fs.readFileSync(recordPath(box.root, long.task_id)), cancelledBytes)

    const short = await submit(box.root, "short", scripted({ sleep_ms: 0 }))
    await waitForEvent(worker, "the short task to finish", finishedOf(short.task_id, 1))
    assert.strictEqual((await read(box.root, short)).state, "complete")
    const completeBytes = fs.readFileSync(recordPath(box.root, short.task_id))
    assert.deepStrictEqual(await cancel(box.root, short), {
      task_id: short.task_id,
      cancelled: false,
      cancel_requested: false,
      state: "complete"
    })
    assert.deepStrictEqual(fs.readFileSync(recordPath(box.root, short.task_id)), completeBytes)

    assert.deepStrictEqual(await stopWorker(worker), summary({ finished: 1, cancelled: 1 }))
  })
})

// ---------------------------------------------------------------------------------------------

describe("relaykeep read: the retry fields", { timeout: 300_000 }, () => {
  it("a queued task reads with max_attempts, not_before and cancel_requested_at, and nothing else new", async () => {
    const root = path.join(tempDir(), "root")
    const receipt = await submit(root, "fields", { job: 1 })
    const result = await relaykeep(["read", ...receiptArgs(root, receipt)])
    const view = jsonOutput(TaskView, result)
    assert.deepStrictEqual(outputKeys(result), [
      "attempt",
      "attempts",
      "cancel_requested_at",
      "client_request_id",
      "created_at",
      "error",
      "finished_at",
      "max_attempts",
      "not_before",
      "payload_sha256",
      "result",
      "started_at",
      "state",
      "task_id",
      "updated_at"
    ])
    assert.strictEqual(view.max_attempts, 1)
    assert.isNull(view.not_before)
    assert.isNull(view.cancel_requested_at)
    // One pass under --max-attempts 4 stamps its policy: the echo completes at once.
    assert.deepStrictEqual(
      jsonOutput(PassReport, await relaykeep(["worker", "--root", root, "--max-attempts", "4"])).dispatched,
      [receipt.task_id]
    )
    const done = await read(root, receipt)
    assert.strictEqual(done.state, "complete")
    assert.strictEqual(done.max_attempts, 4)
  })

  it("a task retried twice: each attempt keeps its own error, the waits follow the backoff, the third attempt's answer is the result", async () => {
    const box = newBox()
    const receipt = await submit(box.root, "flaky", scripted({ fail_attempts: 2 }))
    const worker = startWorker(box, [
      "--log-format",
      "json",
      "--max-attempts",
      "3",
      "--retry-backoff",
      "1s",
      "--retry-backoff-max",
      "2s"
    ])
    await waitForEvent(worker, "attempt 3 to finish", finishedOf(receipt.task_id, 3))
    assert.deepStrictEqual(await stopWorker(worker), summary({ finished: 1, retried: 2 }))
    const ends = jsonEvents(worker.stderr()).flatMap((event) =>
      event.event === "finished"
        ? [[event.attempt, event.outcome, event.requeued, event.error?.retryable]]
        : []
    )
    assert.deepStrictEqual(ends, [
      [1, "failed", true, true],
      [2, "failed", true, true],
      [3, "complete", undefined, undefined]
    ])

    const view = await read(box.root, receipt)
    assert.strictEqual(view.state, "complete")
    assert.strictEqual(view.attempt, 3)
    assert.strictEqual(view.max_attempts, 3)
    assert.isNull(view.error)
    assert.isNull(view.not_before)
    assert.deepStrictEqual(answerOf(view.result), { task_id: receipt.task_id, attempt: 3 })
    assert.deepStrictEqual(
      view.attempts.map((attempt) => [attempt.attempt, attempt.outcome, attempt.error?.tag ?? null]),
      [
        [1, "failed", "ProviderFailed"],
        [2, "failed", "ProviderFailed"],
        [3, "complete", null]
      ]
    )
    for (const n of [1, 2]) {
      const error = view.attempts[n - 1]?.error
      assert.strictEqual(error?.retryable, true)
      assert.include(error?.stderr_tail ?? "", `scripted failure of attempt ${n}`)
    }
    for (const attempt of view.attempts) assert.isUndefined(attempt.late)
    // Each wait is at least half the nominal backoff: 1 s before attempt 2, 2 s before attempt 3.
    const gap = (n: number) =>
      millis(view.attempts[n]?.started_at ?? null) - millis(view.attempts[n - 1]?.ended_at ?? null)
    assert.isAtLeast(gap(1), 500)
    assert.isAtLeast(gap(2), 1_000)
  })
})
