#!/usr/bin/env node
// `npm test`: the checks and the suites in three lanes at once. The type-check (with the Effect
// diagnostics) in one, lint in another, the build then vitest in the third, since the end-to-end
// suites run the built bins. The checks never wait, while a suite file often waits on child
// processes, fsync and timers, so on a small machine the lanes keep the cores busier together than
// they would taking turns. A check's output is printed whole when it ends, under its name and time; vitest's is
// shown as it goes. Every lane runs to its end, and the exit code is non-zero when any step failed.
//
// Usage: node scripts/check.mjs [--checks-only]
import { spawn } from "node:child_process"
import { performance } from "node:perf_hooks"
import process from "node:process"

const checksOnly = process.argv.includes("--checks-only")
const lanes = [["typecheck"], ["lint"], checksOnly ? ["build"] : ["build", "test:main"]]
/** Steps whose output is long and worth seeing as it comes. */
const live = new Set(["test:main"])
const npm = process.platform === "win32" ? "npm.cmd" : "npm"

const runStep = (script) =>
  new Promise((resolve) => {
    const started = performance.now()
    const streamed = live.has(script)
    const child = spawn(npm, ["run", "--silent", script], {
      stdio: streamed ? "inherit" : ["ignore", "pipe", "pipe"]
    })
    const output = []
    child.stdout?.on("data", (chunk) => output.push(chunk))
    child.stderr?.on("data", (chunk) => output.push(chunk))
    child.on("close", (code, signal) => {
      const seconds = ((performance.now() - started) / 1000).toFixed(1)
      const ok = code === 0
      const text = Buffer.concat(output).toString("utf8").trimEnd()
      process.stdout.write(
        `${ok ? "ok" : "FAILED"}: npm run ${script} (${seconds} s)${signal ? `, ended by ${signal}` : ""}\n${
          text === "" ? "" : `${text}\n`
        }`
      )
      resolve(ok)
    })
  })

const runLane = async (steps) => {
  for (const step of steps) if (!(await runStep(step))) return false
  return true
}

const results = await Promise.all(lanes.map(runLane))
process.exit(results.every(Boolean) ? 0 : 1)
