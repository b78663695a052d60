#!/usr/bin/env node
// The checks before the tests, in two lanes at once (one per core of a small machine): the
// type-check with the Effect diagnostics in one, lint then build in the other. Each step's
// output is printed whole when it ends, under its name and time; every lane runs to its end,
// and the exit code is non-zero when any step failed.
//
// Usage: node scripts/check.mjs
import { spawn } from "node:child_process"
import { performance } from "node:perf_hooks"
import process from "node:process"

const lanes = [["typecheck"], ["lint", "build"]]
const npm = process.platform === "win32" ? "npm.cmd" : "npm"

const runStep = (script) =>
  new Promise((resolve) => {
    const started = performance.now()
    const child = spawn(npm, ["run", "--silent", script], { stdio: ["ignore", "pipe", "pipe"] })
    const output = []
    child.stdout.on("data", (chunk) => output.push(chunk))
    child.stderr.on("data", (chunk) => output.push(chunk))
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
