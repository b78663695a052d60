import * as FileSystem from "@effect/platform/FileSystem"
import { Context, Effect, Layer, Option } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { hostname } from "node:os"
import { readdirSync, readFileSync } from "node:fs"

/**
 * The facts about this process and machine that leases, locks and crash recovery rest on:
 * who we are (pid, host, boot), whether another local process is alive, and fresh randomness.
 */
export class Host extends Context.Tag("relaykeep/Host")<
  Host,
  {
    readonly pid: number
    readonly hostname: string
    /** Changes when the machine reboots; a lock or lease from another boot is dead. */
    readonly bootId: string
    /** Whether a process with this pid exists on this host. */
    readonly isAlive: (pid: number) => Effect.Effect<boolean>
    /** A fresh unguessable token (fencing tokens, lock tokens, temp names). */
    readonly token: Effect.Effect<string>
    /** Cryptographically random bytes (secrets). */
    readonly randomBytes: (size: number) => Effect.Effect<Uint8Array>
    /** This process's environment, as it was at start. */
    readonly environment: Readonly<Record<string, string>>
    /** Send a signal to every process of a process group; false when none is left. */
    readonly signalGroup: (pgid: number, signal: "SIGTERM" | "SIGKILL") => Effect.Effect<boolean>
    /** Whether any process of the group is still alive. */
    readonly groupAlive: (pgid: number) => Effect.Effect<boolean>
    /**
     * Whether a live member of the group has every one of `variables` in its environment: how
     * a reaper makes sure a process group is still the one a lost worker started (a pid can be
     * reused) before it stops it. False where there is no /proc.
     */
    readonly groupServes: (
      pgid: number,
      variables: Readonly<Record<string, string>>
    ) => Effect.Effect<boolean>
  }
>() {
  /** The real process table, and the kernel's boot id. */
  static readonly layer = Layer.effect(
    Host,
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      // Without /proc there is no stable boot id: a value derived from the clock and the uptime
      // jitters between processes, and a wrong "other boot" would break live locks. So such
      // systems use one constant: locks and leases then go stale by pid and expiry only, and the
      // index is not rebuilt automatically after a reboot.
      const bootId = yield* fs.readFileString("/proc/sys/kernel/random/boot_id").pipe(
        Effect.map((text) => text.trim()),
        Effect.orElseSucceed(() => "no-boot-id")
      )
      const pidNamespace = yield* fs.readLink("/proc/self/ns/pid").pipe(Effect.option)
      const machine = machineName(
        process.env["RELAYKEEP_HOST"],
        Option.getOrUndefined(pidNamespace),
        hostname()
      )
      if (machine.ignored)
        yield* Effect.logWarning(
          `RELAYKEEP_HOST ignored: it must be 1-255 characters of letters, digits and _.:@/- starting with a letter or digit; using ${machine.name}`
        )
      return Host.of({
        pid: process.pid,
        hostname: machine.name,
        bootId,
        isAlive: (pid) => Effect.sync(() => processExists(pid)),
        token: Effect.sync(() => randomUUID().replaceAll("-", "")),
        randomBytes: (size) => Effect.sync(() => new Uint8Array(randomBytes(size))),
        environment: environmentSnapshot(),
        signalGroup: (pgid, signal) => Effect.sync(() => signalGroup(pgid, signal)),
        groupAlive: (pgid) => Effect.sync(() => signalGroup(pgid, 0)),
        groupServes: (pgid, variables) => Effect.sync(() => groupServes(pgid, variables))
      })
    })
  )

  /**
   * A host for tests: a fixed identity and a process table that is just the set `alive`
   * (our own pid is always alive). Tokens are still random, so two holders never collide.
   */
  static readonly layerTest = (options: {
    readonly pid?: number
    readonly hostname?: string
    readonly bootId?: string
    readonly alive?: ReadonlySet<number>
    readonly environment?: Readonly<Record<string, string>>
  }) =>
    Layer.succeed(
      Host,
      Host.of({
        pid: options.pid ?? 4242,
        hostname: options.hostname ?? "test-host",
        bootId: options.bootId ?? "test-boot",
        isAlive: (pid) => Effect.succeed(pid === (options.pid ?? 4242) || (options.alive?.has(pid) ?? false)),
        token: Effect.sync(() => randomUUID().replaceAll("-", "")),
        randomBytes: (size) => Effect.sync(() => new Uint8Array(randomBytes(size))),
        environment: options.environment ?? {},
        // Process groups are real even in tests: the children that tests spawn are real.
        signalGroup: (pgid, signal) => Effect.sync(() => signalGroup(pgid, signal)),
        groupAlive: (pgid) => Effect.sync(() => signalGroup(pgid, 0)),
        groupServes: (pgid, variables) => Effect.sync(() => groupServes(pgid, variables))
      })
    )
}

/** The pid namespace of a process that is in no container: the kernel's PROC_PID_INIT_INO. */
const InitialPidNamespace = "pid:[4026531836]"
const MachineName = /^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,254}$/

/**
 * How leases name this machine. `chosen` (RELAYKEEP_HOST) wins: set it where machines (or
 * containers) share a hostname, since a reaper checks pids only for leases of its own machine.
 * Without it, the hostname, and inside a pid namespace (a container) the namespace too: two
 * containers with one hostname do not share a process table. `ignored` says that `chosen` was
 * not a valid name.
 */
export const machineName = (
  chosen: string | undefined,
  pidNamespace: string | undefined,
  systemName: string
): { readonly name: string; readonly ignored: boolean } => {
  if (chosen !== undefined && chosen !== "" && MachineName.test(chosen))
    return { name: chosen, ignored: false }
  const inner = pidNamespace?.match(/^pid:\[(\d+)\]$/)?.[1]
  const name =
    pidNamespace === undefined || pidNamespace === InitialPidNamespace || inner === undefined
      ? systemName
      : `${systemName}/pidns-${inner}`
  return { name, ignored: chosen !== undefined && chosen !== "" }
}

const environmentSnapshot = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).flatMap(([key, value]) => (value === undefined ? [] : [[key, value]]))
  )

/** kill(-pgid): deliver to the whole group; signal 0 only asks whether any member is left. */
const signalGroup = (pgid: number, signal: "SIGTERM" | "SIGKILL" | 0): boolean => {
  if (!Number.isInteger(pgid) || pgid <= 1) return false
  try {
    process.kill(-pgid, signal)
    return true
  } catch {
    return false
  }
}

/** The process group of `pid`, from /proc/<pid>/stat (after the command name, which may hold spaces). */
const groupOf = (pid: string): number | undefined => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return Number(fields[2])
  } catch {
    return undefined
  }
}

const environmentHas = (pid: string, variables: Readonly<Record<string, string>>): boolean => {
  try {
    const entries = new Set(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0"))
    return Object.entries(variables).every(([name, value]) => entries.has(`${name}=${value}`))
  } catch {
    return false
  }
}

/** The live members of group `pgid`, found in /proc: does any of them carry `variables`? */
const groupServes = (pgid: number, variables: Readonly<Record<string, string>>): boolean => {
  if (!Number.isInteger(pgid) || pgid <= 1 || !signalGroup(pgid, 0)) return false
  let pids: ReadonlyArray<string>
  try {
    pids = readdirSync("/proc").filter((name) => /^\d+$/.test(name))
  } catch {
    return false
  }
  return pids.some((pid) => groupOf(pid) === pgid && environmentHas(pid, variables))
}

const processExists = (pid: number): boolean => {
  if (!Number.isInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return error instanceof Error && "code" in error && error.code === "EPERM"
  }
}
