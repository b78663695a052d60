/**
 * What a PostgreSQL store last read or wrote of each live task it works on: the record and the
 * row's revision. A transition computes the next record from it and writes it in one
 * statement fenced by that revision; when someone else wrote in between, the statement
 * changes nothing and the store falls back to reading the row under a lock.
 *
 * Only a hint, never the truth: forgetting costs a round trip, nothing else. So it is bounded
 * (the oldest entries go first) and forgets a task once it is finished, since no worker
 * transition applies to a finished task.
 */
import type { TaskId } from "../../domain/ids.js"
import type { TaskRecord } from "../../domain/Task.js"

export interface Remembered {
  readonly record: TaskRecord
  readonly revision: string
  /** The row keeps the payload in its payload column; false for a row written before migration 6. */
  readonly payloadStored: boolean
}

/** About what a few busy workers hold at once, with room for the reaper's running set. */
export const DefaultRemembered = 10_000

export const rememberedRows = (capacity: number = DefaultRemembered) => {
  const entries = new Map<TaskId, Remembered>()
  return {
    get: (taskId: TaskId): Remembered | undefined => entries.get(taskId),
    /** Remember `record` at `revision`; a finished task is forgotten instead. */
    set: (record: TaskRecord, revision: string, payloadStored: boolean): void => {
      entries.delete(record.task_id)
      if (record.state !== "queued" && record.state !== "running") return
      entries.set(record.task_id, { record, revision, payloadStored })
      if (entries.size > capacity) {
        const oldest = entries.keys().next()
        if (oldest.done !== true) entries.delete(oldest.value)
      }
    },
    forget: (taskId: TaskId): void => {
      entries.delete(taskId)
    }
  }
}
