/**
 * The slot and cap bookkeeping of the watching worker, as pure functions over the attempts it
 * runs (task → provider) and its caps. `worker/watch.ts` keeps the running set in a `Ref` and
 * asks these what to claim and when; tests check them directly.
 */
import type { TaskId } from "../domain/ids.js"

/** The attempts a worker runs now: each task with the provider that runs it. */
export type RunningSet = ReadonlyMap<TaskId, string>

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

/** The room left: the free slots, and for each capped provider its cap less what it runs. */
export const roomOf = (running: RunningSet, limits: SlotLimits): ClaimRoom => {
  const taken = runningPerProvider(running)
  const room = new Map<string, number>()
  for (const [provider, cap] of limits.maxPerProvider)
    room.set(provider, Math.max(0, cap - (taken.get(provider) ?? 0)))
  return { limit: Math.max(0, limits.concurrency - running.size), room }
}

/** The running set with the attempts just claimed. */
export const withClaimed = (
  running: RunningSet,
  claimed: ReadonlyArray<{ readonly taskId: TaskId; readonly provider: string }>
): RunningSet => {
  const next = new Map(running)
  for (const { taskId, provider } of claimed) next.set(taskId, provider)
  return next
}

/** The running set without an attempt that ended. */
export const withoutTask = (running: RunningSet, taskId: TaskId): RunningSet => {
  if (!running.has(taskId)) return running
  const next = new Map(running)
  next.delete(taskId)
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
  for (const [provider, left] of asked.room) if (left - (took.get(provider) ?? 0) <= 0) return true
  return false
}
