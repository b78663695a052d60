/**
 * Preloaded into a benchmark's child process (`node --import`): when the process exits, it
 * writes its own CPU time (user and system, in ms) on stderr as one line `bench-cpu-ms N`.
 * On a busy machine a child's wall time is mostly its wait for a core; its CPU time says how
 * much work it did, whatever the machine was doing meanwhile.
 */
import process from "node:process"

process.on("exit", () => {
  const { user, system } = process.cpuUsage()
  process.stderr.write(`\nbench-cpu-ms ${(user + system) / 1000}\n`)
})
