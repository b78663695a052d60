/**
 * A real `relaykeep worker --watch` running the scripted fake claude, for end-to-end tests that
 * need a provider that runs as long as they like: what it started and finished is read from its
 * effects file, and every worker and fake left running is killed after each test.
 */
import { afterEach, assert } from "@effect/vitest"
import { Schema } from "effect"
import type { ChildProcess } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { WatchSummary } from "../../src/worker/watch.js"
import { fakeClaude, isRunning } from "./fakeCli.js"
import { relaykeepBin } from "./mcpProcess.js"
import { spawnEnv } from "./environment.js"

const FakeEffect = Schema.parseJson(
  Schema.Struct({
    event: Schema.Literal("start", "done"),
    task_id: Schema.NullOr(Schema.String),
    attempt: Schema.Int,
    pid: Schema.Int,
    at: Schema.Number
  })
)
export const effectsIn = (file: string) =>
  fs.existsSync(file)
    ? fs
        .readFileSync(file, "utf8")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => Schema.decodeUnknownSync(FakeEffect)(line))
    : []

/** SIGKILL `pid` only while it still runs the fake provider. */
const killFake = (pid: number) => {
  if (!isRunning(pid)) return
  try {
    if (fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("fake-claude")) process.kill(pid, "SIGKILL")
  } catch {
    // Gone meanwhile.
  }
}

/**
 * Scripted workers for this test file. Call it after `useMcpTest()`: after-each hooks run in
 * reverse order, so the workers die before their roots are removed.
 */
export const useScriptedWorkers = () => {
  const workers: Array<ChildProcess> = []
  const effectFiles: Array<string> = []
  afterEach(async () => {
    for (const worker of workers.splice(0)) {
      if (worker.exitCode === null && worker.signalCode === null) {
        worker.kill("SIGKILL")
        await new Promise((resolve) => worker.once("close", resolve))
      }
    }
    for (const file of effectFiles.splice(0)) for (const effect of effectsIn(file)) killFake(effect.pid)
  })

  /** `relaykeep worker --watch` with the scripted fake as claude; its output captured. */
  const startWorker = (root: string, dir: string, effects: string) => {
    const workDir = path.join(dir, "work")
    fs.mkdirSync(workDir, { recursive: true })
    const child = spawn(
      process.execPath,
      [
        relaykeepBin,
        "worker",
        "--watch",
        "--root",
        root,
        "--claude-executable",
        fakeClaude,
        "--work-dir",
        workDir,
        "--kill-grace",
        "2s",
        "--log-format",
        "json"
      ],
      {
        env: spawnEnv({
          PATH: `${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
          FAKE_SCENARIO: "scripted",
          FAKE_EFFECTS: effects,
          FAKE_PIDS_DIR: dir,
          FAKE_LIFETIME_MS: "60000"
        }),
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    workers.push(child)
    effectFiles.push(effects)
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    const exited = new Promise<number | null>((resolve, reject) => {
      child.on("error", reject)
      child.on("close", (code) => resolve(code))
    })
    const pid = child.pid
    if (pid === undefined) throw new Error("the worker did not start")
    return {
      pid,
      stderr: () => stderr,
      /** SIGINT; the worker drains and prints one WatchSummary. */
      stop: async () => {
        process.kill(pid, "SIGINT")
        assert.strictEqual(await exited, 0, `exit code after SIGINT (stderr: ${stderr})`)
        assert.match(stdout, /^[^\n]+\n$/, "stdout is one line")
        return Schema.decodeUnknownSync(Schema.parseJson(WatchSummary), { onExcessProperty: "error" })(stdout)
      }
    }
  }
  return { startWorker }
}
