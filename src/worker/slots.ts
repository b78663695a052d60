/**
 * The slot and cap bookkeeping of the watching worker, as pure functions over the attempts it
 * runs (attempt → provider) and its caps. `worker/watch.ts` keeps the running set in a `Ref` and
 * asks these what to claim and when; tests check them directly.
 */
import type { TaskId } from "../domain/ids.js"
import { ReservedProviders } from "../domain/mcpTask.js"

/**
 * One attempt: a task and its attempt number. A task can be claimed again by its own worker
 * while its last attempt is still winding down (a failure sent it back to the queue, and a slot
 * freed elsewhere claimed it before the old attempt let go of its slot), so the task id alone
 * would let the new attempt's entry be removed by the old one, and the caps be exceeded by one.
 */
export interface AttemptId {
  readonly taskId: TaskId
  readonly attempt: number
}

/** The key of an attempt in a RunningSet. */
export const attemptKey = ({ taskId, attempt }: AttemptId): string => `${taskId}#${attempt}`

/** The attempts a worker runs now, by `attemptKey`: each with the provider that runs it. */
export type RunningSet = ReadonlyMap<string, string>

export interface SlotLimits {
  /** Attempts running at once. */
  readonly concurrency: number
  /** At most this many attempts of a provider at once; providers not named share `concurrency`. */
  readonly maxPerProvider: ReadonlyMap<string, number>
}

/** What a worker may claim now: how many tasks in all, and how many of each capped provider. */
export interface ClaimRoom {
  readonly limit: number
  readonly room: ReadonlyMap<string, number>
}

/** How many attempts of each provider run now. */
export const runningPerProvider = (running: RunningSet): ReadonlyMap<string, number> => {
  const counts = new Map<string, number>()
  for (const provider of running.values()) counts.set(provider, (counts.get(provider) ?? 0) + 1)
  return counts
}

/**
 * The room a worker asks for never includes the reserved providers: tasks an MCP server runs
 * itself (their server claims them the moment it submits them) and broadcast group records
 * (their submitter settles them); a worker that took one could not run it.
 */
export const withoutInServerTasks = (room: ReadonlyMap<string, number>): ReadonlyMap<string, number> =>
  new Map([...room, ...[...ReservedProviders.keys()].map((provider) => [provider, 0] as const)])

/** The room left: the free slots, and for each capped provider its cap less what it runs. */
export const roomOf = (running: RunningSet, limits: SlotLimits): ClaimRoom => {
  const taken = runningPerProvider(running)
  const room = new Map<string, number>()
  for (const [provider, cap] of limits.maxPerProvider)
    room.set(provider, Math.max(0, cap - (taken.get(provider) ?? 0)))
  return { limit: Math.max(0, limits.concurrency - running.size), room: withoutInServerTasks(room) }
}

/** The running set with the attempts just claimed. */
export const withClaimed = (
  running: RunningSet,
  claimed: ReadonlyArray<AttemptId & { readonly provider: string }>
): RunningSet => {
  const next = new Map(running)
  for (const attempt of claimed) next.set(attemptKey(attempt), attempt.provider)
  return next
}

/** The running set without an attempt that ended (another attempt of its task stays). */
export const withoutAttempt = (running: RunningSet, attempt: AttemptId): RunningSet => {
  const key = attemptKey(attempt)
  if (!running.has(key)) return running
  const next = new Map(running)
  next.delete(key)
  return next
}

/**
 * Whether a slot freed later should claim again at once, after a claim that asked for `asked`
 * and took the providers `claimed`. Yes when the claim filled every slot it asked for (more
 * ready tasks may wait), or when a capped provider was left with no room (its tasks may wait
 * for a slot of their own). Otherwise the queue held nothing this worker could take, and only
 * a wake-up (new work) or a retry coming due can change that: a freed slot waits with them.
 */
export const claimAgainWhenFreed = (asked: ClaimRoom, claimed: ReadonlyArray<string>): boolean => {
  if (claimed.length >= asked.limit) return true
  const took = new Map<string, number>()
  for (const provider of claimed) took.set(provider, (took.get(provider) ?? 0) + 1)
  for (const [provider, left] of asked.room)
    if (!ReservedProviders.has(provider) && left - (took.get(provider) ?? 0) <= 0) return true
  return false
}
