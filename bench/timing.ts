/** Small measuring tools the benchmarks share. */
import { spawn } from "node:child_process"

/** Milliseconds since an arbitrary origin, with sub-millisecond resolution. */
export const now = (): number => Number(process.hrtime.bigint()) / 1e6

/** How long `work` takes, in milliseconds. */
export const timed = async (work: () => Promise<unknown>): Promise<number> => {
  const start = now()
  await work()
  return now() - start
}

export interface Exited {
  readonly millis: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * Run a command to its end and time it from spawn to exit. Fails when it exits other than 0,
 * so that a broken command never passes for a fast one.
 */
export const runProcess = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly env?: NodeJS.ProcessEnv; readonly cwd?: string } = {}
): Promise<Exited> =>
  new Promise((resolve, reject) => {
    const start = now()
    const child = spawn(command, args, {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ["ignore", "pipe", "pipe"]
    })
    const stdout: Array<Buffer> = []
    const stderr: Array<Buffer> = []
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk))
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk))
    child.on("error", reject)
    child.on("close", (code, signal) => {
      const millis = now() - start
      const out = Buffer.concat(stdout).toString("utf8")
      const err = Buffer.concat(stderr).toString("utf8")
      if (code === 0) return resolve({ millis, stdout: out, stderr: err })
      reject(new Error(`${command} ${args.join(" ")} exited with ${code ?? signal}: ${err.trim()}`))
    })
  })
