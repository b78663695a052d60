/** Counts over the last hour and day, and per hour, from task summaries. Pure. */
import type { TaskSummary } from "../domain/Task.js"
import { isoTime, timeMillis } from "../domain/Task.js"

const Hour = 60 * 60 * 1000

export interface Counts {
  submitted: number
  complete: number
  failed: number
  cancelled: number
}

export interface Stats {
  readonly now: string
  readonly hour: Counts
  readonly day: Counts
  /** 24 hours, oldest first; the last is the current (partial) hour. */
  readonly buckets: ReadonlyArray<Counts & { readonly start: string }>
}

const zero = (): Counts => ({ submitted: 0, complete: 0, failed: 0, cancelled: 0 })

/**
 * A task counts as submitted when it was created in a window, and as complete, failed or
 * cancelled when it finished so in a window.
 */
export const statsOf = (tasks: Iterable<TaskSummary>, now: number): Stats => {
  const hour = zero()
  const day = zero()
  const firstStart = Math.floor(now / Hour) * Hour - 23 * Hour
  const buckets = Array.from({ length: 24 }, (_, i) => ({ start: isoTime(firstStart + i * Hour), ...zero() }))
  const count = (at: number, key: keyof Counts) => {
    if (at > now) return
    if (at > now - Hour) hour[key] += 1
    if (at > now - 24 * Hour) day[key] += 1
    const bucket = buckets[Math.floor((at - firstStart) / Hour)]
    if (at >= firstStart && bucket !== undefined) bucket[key] += 1
  }
  for (const task of tasks) {
    count(timeMillis(task.created_at), "submitted")
    if (task.finished_at !== null && task.state !== "queued" && task.state !== "running")
      count(timeMillis(task.finished_at), task.state)
  }
  return { now: isoTime(now), hour, day, buckets }
}
