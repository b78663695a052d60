/**
 * submit-concurrent: durable submits per second from eight processes submitting at once on one
 * file store, against one process alone. Each process submits one task after another, as a
 * script or an MCP server answering one client does; what eight gain over one is what they
 * share: the file system's journal commits for their concurrent fsyncs, and the cores.
 */
import { spawn } from "node:child_process"
import type { ChildProcessByStdio } from "node:child_process"
import path from "node:path"
import type { Readable, Writable } from "node:stream"
import { fileURLToPath } from "node:url"
import type { Benchmark } from "../harness.js"
import { now } from "../timing.js"

const submitter = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "submitter.mjs")
/** Submits per process per run. */
const PerProcess = 150
const Processes = 8

type Child = ChildProcessByStdio<Writable, Readable, null>

/** Resolves when the child has written `line` on stdout; rejects if it exits first. */
const saying = (child: Child, line: string): Promise<void> =>
  new Promise((resolve, reject) => {
    let seen = ""
    const onData = (chunk: Buffer) => {
      seen += chunk.toString("utf8")
      if (seen.split("\n").includes(line)) {
        child.stdout.off("data", onData)
        resolve()
      }
    }
    child.stdout.on("data", onData)
    child.once("exit", (code) => reject(new Error(`a submitter exited with ${code} before "${line}"`)))
  })

/** `processes` submitters on a fresh root, started together once all are ready: submits per second. */
const rate = async (root: string, processes: number): Promise<number> => {
  const children: Array<Child> = Array.from({ length: processes }, (_, p) =>
    spawn(process.execPath, [submitter, root, `p${p}`, String(PerProcess)], {
      stdio: ["pipe", "pipe", "inherit"]
    })
  )
  try {
    await Promise.all(children.map((child) => saying(child, "ready")))
    const done = children.map((child) => saying(child, "done"))
    const start = now()
    for (const child of children) child.stdin.write("go\n")
    await Promise.all(done)
    const seconds = (now() - start) / 1000
    return (processes * PerProcess) / seconds
  } finally {
    for (const child of children) child.kill()
  }
}

export const submitConcurrent: Benchmark = {
  name: "submit-concurrent",
  title: `Durable submits per second on one file store from ${Processes} processes at once, each submitting ${PerProcess} tasks one after another, against one process alone.`,
  baseline: "one process submitting alone, in the same way",
  unit: "submits per second",
  target: {
    kind: "at-least-best",
    pairs: [{ subject: "eight_processes", baselines: ["one_process"] }],
    min: 3
  },
  setup: async ({ dir }) => {
    let serial = 0
    const freshRoot = () => path.join(dir, `root-${(serial += 1)}`)
    return {
      run: async () => ({
        one_process: await rate(freshRoot(), 1),
        eight_processes: await rate(freshRoot(), Processes)
      }),
      details: () => ({ processes: Processes, submits_per_process: PerProcess }),
      close: async () => undefined
    }
  }
}
