/**
 * Stopping every process of an attempt, not only the process group of the one it started: CLIs
 * put their helpers in groups of their own (Codex starts each MCP server with setpgid, in its
 * session, with a stripped environment), and a daemon double-forks and calls setsid to leave both
 * the group and the session (it normally keeps its environment).
 *
 * With /proc (Linux) an attempt's processes are the members of its leader's process group and
 * session (the leader was spawned detached: its pid is both ids), every process whose environment
 * carries the attempt's marker variables, and the members of a group or session led by such a
 * carrier. On Linux a pid that is still some process's group or session id is never reused, so
 * once the leader has exited its group and session still name only its own descendants. Without
 * /proc only the leader's process group can be reached.
 */
import { Duration, Effect, Option, Schedule } from "effect"
import { Host } from "./Host.js"
import type { ProcessEntry } from "./Host.js"

/**
 * The variables that mark every process an attempt starts: the CLI launcher puts them in the
 * child's environment, which its descendants inherit unless they clear it.
 */
export const attemptMarker = (taskId: string, attempt: number): Readonly<Record<string, string>> => ({
  RELAYKEEP_TASK_ID: taskId,
  RELAYKEEP_ATTEMPT: String(attempt)
})

/** Which processes an attempt owns. */
export interface AttemptProcesses {
  /** The process the attempt started, spawned detached: it led its own group and session. */
  readonly leader: number | undefined
  /** The attempt's marker variables; without one (the doctor's probe), the group and session only. */
  readonly marker: Readonly<Record<string, string>> | undefined
  /**
   * Whether the leader's group and session are known to be the attempt's. True for the worker
   * that spawned the leader and is stopping it now. False for a reaper: a recorded pid may have
   * been reused, so it takes the group and session only once it sees a marker carrier in them.
   */
  readonly leaderKnown: boolean
}

/** What one look at the process table found. */
export interface AttemptMembers {
  /** The attempt's live processes, never `self`. */
  readonly pids: ReadonlyArray<number>
  /** Leaders whose groups and sessions are shown to be the attempt's, this look included. */
  readonly proven: ReadonlySet<number>
}

/**
 * The attempt's processes in `table`: the carriers of its marker, and the members of the groups
 * and sessions led by `proven` leaders. A carrier is proven as a leader; so is `leader` once a
 * carrier is a member of its group or session. Proof is kept across looks (pass `proven` back):
 * once SIGTERM has ended the carriers, their groups' and sessions' members are still theirs.
 */
export const attemptMembers = (
  table: ReadonlyArray<ProcessEntry>,
  proven: ReadonlySet<number>,
  leader: number | undefined,
  self: number
): AttemptMembers => {
  const carriers = table.filter((entry) => entry.carriesMarker && entry.pid !== self)
  const next = new Set(proven)
  for (const carrier of carriers) next.add(carrier.pid)
  if (leader !== undefined && carriers.some((entry) => entry.pgid === leader || entry.sid === leader))
    next.add(leader)
  const pids = table
    .filter(
      (entry) => entry.pid !== self && (entry.carriesMarker || next.has(entry.pgid) || next.has(entry.sid))
    )
    .map((entry) => entry.pid)
  return { pids, proven: next }
}

// Each look reads every process's stat (and environ, with a marker): often enough that a stop
// ends soon after the last process does, rarely enough not to load a busy host.
const Poll = Duration.millis(100)
/** How long to wait for SIGKILL to take, so that a stuck kernel cannot hang the worker. */
const KillWait = Duration.seconds(10)

/**
 * Stop every process of an attempt: SIGTERM to each (once), then, once `graceMillis` have passed
 * with any left, SIGKILL to whatever is left, then wait (bounded) until none is left. The table
 * is read again at every step, so descendants started meanwhile are reached too. Only processes
 * of our own user can be seen and signalled; one that cannot be signalled is not waited for.
 * Returns the pids that were sent a signal (the leader, for the group, where there is no /proc).
 */
export const stopProcessTree = Effect.fn("ProcessTree.stop")(function* (
  target: AttemptProcesses,
  graceMillis: number
) {
  const host = yield* Host
  const marker = target.marker ?? {}
  const leader = target.leader
  const signalled = new Set<number>()
  const unreachable = new Set<number>()
  let proven: ReadonlySet<number> = new Set(target.leaderKnown && leader !== undefined ? [leader] : [])
  let groupTermed = false

  /** Look again and signal the members (SIGTERM once each); whether any member is left. */
  const round = (signal: "SIGTERM" | "SIGKILL") =>
    Effect.gen(function* () {
      const table = yield* host.processTable(marker)
      if (Option.isNone(table)) {
        // No /proc: the leader's group is all there is to reach, and only when it is known ours.
        if (!target.leaderKnown || leader === undefined) return false
        if (signal === "SIGTERM" && groupTermed) return yield* host.groupAlive(leader)
        groupTermed = true
        const delivered = yield* host.signalGroup(leader, signal)
        if (delivered) signalled.add(leader)
        return delivered
      }
      const found = attemptMembers(table.value, proven, leader, host.pid)
      proven = found.proven
      let left = false
      for (const pid of found.pids) {
        if (unreachable.has(pid)) continue
        left = true
        if (signal === "SIGTERM" && signalled.has(pid)) continue
        if (yield* host.signal(pid, signal)) signalled.add(pid)
        else unreachable.add(pid)
      }
      return left
    })
  // Interruptible even when the stop runs as a finalizer (uninterruptible): otherwise the
  // timeouts below could not end these waits, and a process that ignores SIGTERM would keep the
  // worker waiting forever instead of getting its SIGKILL.
  const untilNoneLeft = (signal: "SIGTERM" | "SIGKILL") =>
    Effect.interruptible(
      Effect.repeat(round(signal), { while: (left) => left, schedule: Schedule.spaced(Poll) })
    )

  if (!(yield* round("SIGTERM"))) return [...signalled]
  const stopped = yield* Effect.timeoutOption(untilNoneLeft("SIGTERM"), Duration.millis(graceMillis))
  if (Option.isNone(stopped)) yield* Effect.timeoutOption(untilNoneLeft("SIGKILL"), KillWait)
  return [...signalled]
})
