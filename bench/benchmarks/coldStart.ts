/**
 * cold-start: how long the CLI takes to do something small from a standing start, against
 * starting Node itself. `relaykeep read` of an existing task is judged; `relaykeep-tasks`
 * answering `tools/list` is reported beside it.
 */
import { spawn } from "node:child_process"
import path from "node:path"
import { fileURLToPath } from "node:url"
import type { Benchmark } from "../harness.js"
import { now, runProcess } from "../timing.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const bin = (name: string) => path.join(repo, "dist", "bin", `${name}.js`)

/** A JSON-RPC line to the server. */
const rpc = (message: object) => `${JSON.stringify(message)}\n`

/**
 * Spawn `relaykeep-tasks`, initialize, ask for `tools/list`, and time spawn → the list's answer.
 * The server then sees stdin close and exits.
 */
const toolsList = (root: string, env: NodeJS.ProcessEnv): Promise<number> =>
  new Promise((resolve, reject) => {
    const start = now()
    const child = spawn(process.execPath, [bin("relaykeep-tasks"), "--root", root], {
      env,
      stdio: ["pipe", "pipe", "pipe"]
    })
    let buffered = ""
    let answered: number | undefined
    const stderr: Array<Buffer> = []
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk))
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8")
      let newline = buffered.indexOf("\n")
      while (newline >= 0) {
        const line = buffered.slice(0, newline)
        buffered = buffered.slice(newline + 1)
        newline = buffered.indexOf("\n")
        const message: unknown = JSON.parse(line)
        if (typeof message !== "object" || message === null || !("id" in message)) continue
        if (message.id === 1) {
          child.stdin.write(rpc({ jsonrpc: "2.0", method: "notifications/initialized" }))
          child.stdin.write(rpc({ jsonrpc: "2.0", id: 2, method: "tools/list" }))
        } else if (message.id === 2) {
          const result = "result" in message ? message.result : undefined
          const listed = typeof result === "object" && result !== null && "tools" in result
          if (!listed) reject(new Error(`tools/list failed: ${line}`))
          answered = now() - start
          child.stdin.end()
        }
      }
    })
    child.on("error", reject)
    child.on("close", (code) => {
      if (answered !== undefined && code === 0) resolve(answered)
      else reject(new Error(`relaykeep-tasks exited with ${code}: ${Buffer.concat(stderr).toString("utf8")}`))
    })
    child.stdin.write(
      rpc({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "bench", version: "1" }
        }
      })
    )
  })

export const coldStart: Benchmark = {
  name: "cold-start",
  title:
    "Wall time from spawn to exit of `relaykeep read` of an existing task (and from spawn to the answer of `tools/list` from `relaykeep-tasks`), in milliseconds, with the compile cache the first run wrote.",
  baseline: "`node -e 0`",
  unit: "ms",
  target: { kind: "at-most", subject: "read", baseline: "node", max: 2.5 },
  setup: async ({ dir }) => {
    const root = path.join(dir, "root")
    // A cache of its own, so that the warm-up run writes it and the measured runs use it.
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      XDG_CACHE_HOME: path.join(dir, "cache"),
      RELAYKEEP_ROOT: root
    }
    delete env["RELAYKEEP_STORE"]
    const payload = JSON.stringify({ provider: "echo", prompt: "cold start" })
    const submitted = await runProcess(
      process.execPath,
      [bin("relaykeep"), "submit", "--id", "cold", "--payload", payload],
      { env }
    )
    const receipt: unknown = JSON.parse(submitted.stdout)
    if (
      typeof receipt !== "object" ||
      receipt === null ||
      !("task_id" in receipt) ||
      !("payload_sha256" in receipt)
    ) {
      throw new Error(`unexpected receipt: ${submitted.stdout}`)
    }
    const readArgs = [
      bin("relaykeep"),
      "read",
      "--task-id",
      String(receipt.task_id),
      "--sha",
      String(receipt.payload_sha256)
    ]
    const uncached = { ...env, RELAYKEEP_COMPILE_CACHE: "off" }

    return {
      run: async () => {
        const node = (await runProcess(process.execPath, ["-e", "0"], { env })).millis
        const read = await runProcess(process.execPath, readArgs, { env })
        if (!read.stdout.includes('"state"')) throw new Error(`read printed no task: ${read.stdout}`)
        const readUncached = (await runProcess(process.execPath, readArgs, { env: uncached })).millis
        const tools = await toolsList(root, env)
        return { node, read: read.millis, "read-uncached": readUncached, "tools-list": tools }
      },
      close: async () => undefined
    }
  }
}
