/**
 * The built binaries as plain child processes: the `relaykeep` CLI (one JSON line out, or one
 * `Tag: message` line on stderr), and a stdio MCP server driven by hand, line by line.
 * Run `npm run build` first: everything here spawns `dist/bin/*.js`.
 */
import { assert } from "@effect/vitest"
import { Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { spawnEnv } from "./environment.js"

export const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const bin = (name: string): string => path.join(repo, "dist", "bin", `${name}.js`)
export const tasksBin = bin("relaykeep-tasks")
export const memoryBin = bin("relaykeep-memory")
export const relaykeepBin = bin("relaykeep")

/** A guard against a hung child, never a wait a test relies on. */
export const KillAfterMillis = 60_000

export interface RunResult {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Run `node <binary> ...args` with stdin closed at once; resolves once it
 * has exited and its pipes are closed. No variable choosing a store is inherited.
 */
export const runNode = (
  binary: string,
  args: ReadonlyArray<string>,
  options: { readonly env?: Readonly<Record<string, string>> } = {}
): Promise<RunResult> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [binary, ...args], {
      env: spawnEnv(options.env),
      stdio: ["pipe", "pipe", "pipe"],
      timeout: KillAfterMillis,
      killSignal: "SIGKILL"
    })
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk))
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk))
    child.stdin.on("error", () => undefined)
    child.stdin.end()
    child.on("error", reject)
    child.on("close", (code) =>
      resolve({
        code,
        stdout: Buffer.concat(stdout).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8")
      })
    )
  })

export const relaykeep = (args: ReadonlyArray<string>, options?: { readonly env?: Record<string, string> }) =>
  runNode(relaykeepBin, args, options)

/** A CLI success: exit 0, empty stderr, one JSON line on stdout decoding as `schema`. */
export const cliJson = <A, I>(schema: Schema.Schema<A, I>, result: RunResult): A => {
  assert.strictEqual(result.code, 0, `exit code (stderr: ${result.stderr})`)
  assert.strictEqual(result.stderr, "", "stderr of a success")
  assert.match(result.stdout, /^[^\n]+\n$/, "stdout is one line")
  return Schema.decodeUnknownSync(Schema.parseJson(schema), { onExcessProperty: "error" })(result.stdout)
}

/** A CLI failure: the exit code, empty stdout, one line `Tag: ...` on stderr. Returns the line. */
export const cliFailure = (result: RunResult, exitCode: number, tag: string): string => {
  assert.strictEqual(result.code, exitCode, `exit code (stdout: ${result.stdout}, stderr: ${result.stderr})`)
  assert.strictEqual(result.stdout, "", "stdout of a failure")
  assert.match(result.stderr, /^[^\n]+\n$/, "stderr is one line")
  assert.isTrue(result.stderr.startsWith(`${tag}: `), `stderr starts with ${tag}: ${result.stderr}`)
  return result.stderr.trim()
}

/** The bytes of a file, or null when it does not exist. */
export const bytesOf = (file: string): Buffer | null => (fs.existsSync(file) ? fs.readFileSync(file) : null)

export const writeLines = (file: string, lines: ReadonlyArray<string>): void =>
  fs.writeFileSync(file, lines.map((line) => `${line}\n`).join(""))

export interface RawExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  /** Every line the server printed on stdout, as printed. */
  readonly stdoutLines: ReadonlyArray<string>
  readonly stderr: string
  /** From the moment stdin was closed to the moment the process exited. */
  readonly millisAfterStdinClosed: number
}

/**
 * A JSON-RPC 2.0 message as a stdio server may print it: a response or a notification/request.
 * Decode with `onExcessProperty: "error"` to reject anything else.
 */
export const JsonRpcLine = Schema.parseJson(
  Schema.Union(
    Schema.Struct({
      jsonrpc: Schema.Literal("2.0"),
      id: Schema.Union(Schema.String, Schema.Number),
      result: Schema.Unknown
    }),
    Schema.Struct({
      jsonrpc: Schema.Literal("2.0"),
      id: Schema.Union(Schema.String, Schema.Number, Schema.Null),
      error: Schema.Struct({ code: Schema.Number, message: Schema.String })
    }),
    Schema.Struct({
      jsonrpc: Schema.Literal("2.0"),
      method: Schema.String,
      id: Schema.optional(Schema.Union(Schema.String, Schema.Number))
    })
  )
)

export type RawServer = ReturnType<typeof spawnRaw>

/**
 * A stdio server driven by hand: JSON-RPC lines in, stdout lines out, no SDK in between.
 * `response(id)` resolves when a line with that id arrives; `exited` when the process ends.
 * (Through `useMcpTest().raw`, a server still running after its test is killed.)
 */
export const spawnRaw = (binary: string, args: ReadonlyArray<string>) => {
  const child = spawn(process.execPath, [binary, ...args], {
    stdio: ["pipe", "pipe", "pipe"],
    timeout: KillAfterMillis,
    killSignal: "SIGKILL"
  })
  const lines: Array<string> = []
  const seen = new Set<number>()
  const waiting = new Map<number, () => void>()
  let buffered = ""
  let stderr = ""
  let stdinClosedAt = Number.NaN
  child.stdout.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8")
    for (let cut = buffered.indexOf("\n"); cut !== -1; cut = buffered.indexOf("\n")) {
      const line = buffered.slice(0, cut)
      buffered = buffered.slice(cut + 1)
      lines.push(line)
      const id = Schema.decodeUnknownOption(IdOf)(line)
      if (id._tag === "Some") {
        seen.add(id.value.id)
        waiting.get(id.value.id)?.()
      }
    }
  })
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  child.stdin.on("error", () => undefined)
  const exited = new Promise<RawExit>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (code, signal) => {
      if (buffered !== "") lines.push(buffered)
      for (const wake of waiting.values()) wake()
      resolve({
        code,
        signal,
        stdoutLines: lines,
        stderr,
        millisAfterStdinClosed: performance.now() - stdinClosedAt
      })
    })
  })
  return {
    send: (message: Record<string, unknown>) => child.stdin.write(`${JSON.stringify(message)}\n`),
    /**
     * One line written as given (a newline is added), for what JSON.stringify cannot write:
     * duplicate keys, big integers, invalid UTF-8. Resolves once the pipe has taken it.
     */
    sendLine: (line: string | Buffer): Promise<void> =>
      new Promise((resolve) => {
        child.stdin.write(Buffer.concat([typeof line === "string" ? Buffer.from(line) : line, Newline]), () =>
          resolve()
        )
      }),
    /** Every stdout line printed so far. */
    lines: (): ReadonlyArray<string> => [...lines],
    /** Resolves once a line with this id has been printed, or the process has exited. */
    response: (id: number): Promise<void> =>
      new Promise((resolve) => {
        if (seen.has(id) || child.exitCode !== null || child.signalCode !== null) return resolve()
        waiting.set(id, resolve)
      }),
    closeStdin: () => {
      stdinClosedAt = performance.now()
      child.stdin.end()
    },
    /** Stop the process if it is still running (cleanup only). */
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      return exited.then(() => undefined)
    },
    exited
  }
}

const Newline = Buffer.from("\n")

const IdOf = Schema.parseJson(Schema.Struct({ id: Schema.Number }))

export const initializeRequest = (id: number) => ({
  jsonrpc: "2.0",
  id,
  method: "initialize",
  params: {
    protocolVersion: "2025-06-18",
    capabilities: {},
    clientInfo: { name: "relaykeep-e2e", version: "1" }
  }
})
export const initializedNotification = { jsonrpc: "2.0", method: "notifications/initialized" }
