import * as FileSystem from "@effect/platform/FileSystem"
import { Context, Effect, Layer, Option } from "effect"
import { randomBytes, randomUUID } from "node:crypto"
import { hostname } from "node:os"
import { readdirSync, readFileSync } from "node:fs"

/** One live process as /proc shows it: what tells whether it belongs to an attempt. */
export interface ProcessEntry {
  readonly pid: number
  /** Its process group. */
  readonly pgid: number
  /** Its session. */
  readonly sid: number
  /**
   * Whether its environment (as it was when it exec'd) holds every one of the marker variables
   * asked for. Never for an empty marker, nor for a process whose environment cannot be read
   * (another user's).
   */
  readonly carriesMarker: boolean
}

/**
 * The facts about this process and machine that leases, locks and crash recovery rest on:
 * who we are (pid, host, boot), whether another local process is alive, and fresh randomness.
 */
export class Host extends Context.Tag("relaykeep/Host")<
  Host,
  {
    readonly pid: number
    /** The user this process runs as; undefined where there are no uids (Windows). */
    readonly uid: number | undefined
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
    /** Send a signal to one process; false when it is gone or not ours to signal. */
    readonly signal: (pid: number, signal: "SIGTERM" | "SIGKILL") => Effect.Effect<boolean>
    /**
     * The live processes of this host as /proc shows them now (zombies left out), each with
     * whether it carries every one of `marker` in its environment: what a stop and a reaper use to
     * find an attempt's processes (see ProcessTree). A snapshot: a process in it can exit, and
     * its pid be reused, before anyone acts on it. None where there is no /proc (macOS): only
     * process groups can be reached there.
     */
    readonly processTable: (
      marker: Readonly<Record<string, string>>
    ) => Effect.Effect<Option.Option<ReadonlyArray<ProcessEntry>>>
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
        uid: process.getuid?.(),
        hostname: machine.name,
        bootId,
        isAlive: (pid) => Effect.sync(() => processExists(pid)),
        token: Effect.sync(() => randomUUID().replaceAll("-", "")),
        randomBytes: (size) => Effect.sync(() => new Uint8Array(randomBytes(size))),
        environment: environmentSnapshot(),
        signalGroup: (pgid, signal) => Effect.sync(() => signalGroup(pgid, signal)),
        groupAlive: (pgid) => Effect.sync(() => signalGroup(pgid, 0)),
        signal: (pid, signal) => Effect.sync(() => signalProcess(pid, signal)),
        processTable: (marker) => Effect.sync(() => processTable(marker))
      })
    })
  )

  /**
   * A host for tests: a fixed identity and a process table that is just the set `alive`
   * (our own pid is always alive). Tokens are still random, so two holders never collide.
   */
  static readonly layerTest = (options: {
    readonly pid?: number
    /** Whose files a root must be (default: the real user's, since tests make real files). */
    readonly uid?: number
    readonly hostname?: string
    readonly bootId?: string
    readonly alive?: ReadonlySet<number>
    readonly environment?: Readonly<Record<string, string>>
  }) =>
    Layer.succeed(
      Host,
      Host.of({
        pid: options.pid ?? 4242,
        uid: options.uid ?? process.getuid?.(),
        hostname: options.hostname ?? "test-host",
        bootId: options.bootId ?? "test-boot",
        isAlive: (pid) => Effect.succeed(pid === (options.pid ?? 4242) || (options.alive?.has(pid) ?? false)),
        token: Effect.sync(() => randomUUID().replaceAll("-", "")),
        randomBytes: (size) => Effect.sync(() => new Uint8Array(randomBytes(size))),
        environment: options.environment ?? {},
        // The process table is real even in tests: the children that tests spawn are real.
        signalGroup: (pgid, signal) => Effect.sync(() => signalGroup(pgid, signal)),
        groupAlive: (pgid) => Effect.sync(() => signalGroup(pgid, 0)),
        signal: (pid, signal) => Effect.sync(() => signalProcess(pid, signal)),
        processTable: (marker) => Effect.sync(() => processTable(marker))
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

/** kill(pid): one process; false when it is gone or another user's. */
const signalProcess = (pid: number, signal: "SIGTERM" | "SIGKILL"): boolean => {
  if (!Number.isInteger(pid) || pid <= 1) return false
  try {
    process.kill(pid, signal)
    return true
  } catch {
    return false
  }
}

/** State, group and session of `pid`, from /proc/<pid>/stat (after the command name, which may hold spaces). */
const statOf = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return { state: fields[0] ?? "", pgid: Number(fields[2]), sid: Number(fields[3]) }
  } catch {
    return undefined
  }
}

const environmentHas = (pid: number, marker: ReadonlyArray<string>): boolean => {
  if (marker.length === 0) return false
  try {
    const entries = new Set(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0"))
    return marker.every((entry) => entries.has(entry))
  } catch {
    return false
  }
}

const processTable = (
  marker: Readonly<Record<string, string>>
): Option.Option<ReadonlyArray<ProcessEntry>> => {
  let names: ReadonlyArray<string>
  try {
    names = readdirSync("/proc")
  } catch {
    return Option.none()
  }
  const wanted = Object.entries(marker).map(([name, value]) => `${name}=${value}`)
  return Option.some(
    names.flatMap((name) => {
      if (!/^\d+$/.test(name)) return []
      const pid = Number(name)
      const stat = statOf(pid)
      // Gone meanwhile, or a zombie (Z) or dead (X) process: it runs nothing that could be stopped.
      if (stat === undefined || stat.state === "Z" || stat.state === "X") return []
      return [{ pid, pgid: stat.pgid, sid: stat.sid, carriesMarker: environmentHas(pid, wanted) }]
    })
  )
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
