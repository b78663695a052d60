/** The machine a run was taken on, as the report shows it. */
import { execFileSync } from "node:child_process"
import os from "node:os"

export interface Machine {
  readonly date: string
  readonly os: string
  readonly cpu: string
  readonly cores: number
  readonly memory_gib: number
  readonly node: string
  readonly filesystem: string
  readonly postgres: string | null
  /** The 1-minute load average when the results were written: a busy machine skews every figure. */
  readonly load_average: number
}

/** The file system type under `dir`, as `df` names it; "unknown" where `df` cannot tell. */
const filesystemOf = (dir: string): string => {
  try {
    const lines = execFileSync("df", ["-T", dir], { encoding: "utf8" }).trim().split("\n")
    return lines[1]?.split(/\s+/)[1] ?? "unknown"
  } catch {
    return "unknown"
  }
}

/** Whether `value` is a Machine as latest.json holds it (read back by `npm run bench -- --report`). */
export const isMachine = (value: unknown): value is Machine =>
  typeof value === "object" &&
  value !== null &&
  ["date", "os", "cpu", "node", "filesystem"].every(
    (key) => key in value && typeof Reflect.get(value, key) === "string"
  ) &&
  ["cores", "memory_gib", "load_average"].every(
    (key) => key in value && typeof Reflect.get(value, key) === "number"
  ) &&
  "postgres" in value &&
  (value.postgres === null || typeof value.postgres === "string")

export const describeMachine = (dir: string, postgres: string | null): Machine => ({
  date: new Date().toISOString(),
  os: `${os.type()} ${os.release()} ${os.arch()}`,
  cpu: os.cpus()[0]?.model.trim() ?? "unknown",
  cores: os.cpus().length,
  memory_gib: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  filesystem: filesystemOf(dir),
  postgres,
  load_average: Math.round(os.loadavg()[0] ?? 0)
})
