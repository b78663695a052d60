/**
 * Running the built binaries as real child processes, and reading what they print.
 * Every command prints one JSON document on stdout, or one line `Tag: message` on stderr.
 */
import { assert } from "@effect/vitest"
import { Schema } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { InvalidRecordReport, TaskState, TaskSummary } from "../../src/domain/Task.js"
import { spawnEnv } from "./environment.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const relaykeepBin = path.join(repo, "dist", "bin", "relaykeep.js")
export const workerBin = path.join(repo, "dist", "bin", "relaykeep-worker.js")

export interface RunResult {
  readonly code: number | null
  /** Set when the process was killed, e.g. by the hang guard below. */
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

export interface RunOptions {
  /** Extra environment; no variable choosing a store is inherited from the test run. */
  readonly env?: Readonly<Record<string, string>>
  /** Written to the child's stdin, which is then closed (stdin is always closed). */
  readonly stdin?: string
  /** Run under this umask (through /bin/sh), e.g. 0 to prove modes are set, not inherited. */
  readonly umask?: number
}

/** A guard against a hung child, not a wait: a test never relies on it. */
const KillAfterMillis = 240_000

/** Run `node <bin> ...args` and resolve when the process has exited and its pipes are closed. */
export const run = (bin: string, args: ReadonlyArray<string>, options: RunOptions = {}): Promise<RunResult> =>
  new Promise((resolve, reject) => {
    const [command, argv] =
      options.umask === undefined
        ? [process.execPath, [bin, ...args]]
        : [
            "/bin/sh",
            ["-c", `umask ${options.umask.toString(8)} && exec "$0" "$@"`, process.execPath, bin, ...args]
          ]
    const child = spawn(command, argv, {
      env: spawnEnv(options.env),
      stdio: ["pipe", "pipe", "pipe"],
      timeout: KillAfterMillis,
      killSignal: "SIGKILL"
    })
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk))
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk))
    // A child that fails before reading stdin closes the pipe; that is its answer, not ours.
    child.stdin.on("error", () => undefined)
    child.stdin.end(options.stdin ?? "")
    child.on("error", reject)
    child.on("close", (code, signal) =>
      resolve({
        code,
        signal,
        stdout: Buffer.concat(stdout).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8")
      })
    )
  })

export const relaykeep = (args: ReadonlyArray<string>, options?: RunOptions) =>
  run(relaykeepBin, args, options)
export const relaykeepWorker = (args: ReadonlyArray<string>, options?: RunOptions) =>
  run(workerBin, args, options)

/** A success: exit 0, nothing on stderr, and exactly one JSON document (one line) on stdout. */
export const jsonOutput = <A, I>(schema: Schema.Schema<A, I>, result: RunResult): A => {
  assert.strictEqual(result.code, 0, `exit code (signal: ${result.signal}, stderr: ${result.stderr})`)
  assert.strictEqual(result.stderr, "", "stderr of a success")
  assert.match(result.stdout, /^[^\n]+\n$/, "stdout is one line")
  return Schema.decodeUnknownSync(Schema.parseJson(schema), { onExcessProperty: "error" })(result.stdout)
}

/** The keys of the one JSON object on stdout, sorted. */
export const outputKeys = (result: RunResult): ReadonlyArray<string> =>
  Object.keys(Schema.decodeUnknownSync(Schema.parseJson(Schema.Object))(result.stdout)).sort()

/** A failure: the exit code, empty stdout, one line `tag: message` on stderr. Returns the message. */
export const failureOutput = (result: RunResult, exitCode: 1 | 2, tag: string): string => {
  assert.strictEqual(result.code, exitCode, `exit code (signal: ${result.signal}, stderr: ${result.stderr})`)
  assert.strictEqual(result.stdout, "", "stdout of a failure")
  assert.match(result.stderr, /^[^\n]+\n$/, "stderr is one line")
  assert.isTrue(result.stderr.startsWith(`${tag}: `), `stderr starts with ${tag}: ${result.stderr}`)
  const message = result.stderr.slice(tag.length + 2).trim()
  assert.isAbove(message.length, 0, "the message is not empty")
  return message
}

export const ListOutput = Schema.Struct({
  tasks: Schema.Array(TaskSummary),
  next_cursor: Schema.NullOr(Schema.String)
})

export const CheckOutput = Schema.Struct({
  ok: Schema.Boolean,
  records: Schema.Int,
  states: Schema.Record({ key: TaskState, value: Schema.Int }),
  invalid_records: Schema.Array(InvalidRecordReport)
})
