/**
 * Where everything lives under a data root. The record is the truth; index markers are hints
 * that let a pass find live tasks without reading finished ones.
 *
 *   <root>/secret                        HMAC key for task ids (0600)
 *   <root>/boot                          boot id of the machine that last reconciled this root
 *   <root>/tasks/<task_id>.json          the record
 *   <root>/index/queued/<ms>-<task_id>   marker: may be queued (names sort oldest first); a
 *                                        submit's holds its pid while the record is linked
 *   <root>/index/running/<task_id>       empty marker: may be running
 *   <root>/index/journal/, index/summary/ the summary index of list and counts (summaryIndex.ts)
 *   <root>/locks/<key>                   short-lived lock files
 *   <root>/workers/<instance>.json       a watching worker's last heartbeat (a hint, not fsynced)
 *   <root>/writers/<boot>-<pid>-<token>  a store instance that writes records, while it lives
 *   <root>/audit/<YYYY-MM-DD>.jsonl      the MCP audit log
 *   <root>/config.json                   provider settings (read by the CLI and the worker)
 *   <root>/dashboard.token               the dashboard's capability token
 */
import type { Path } from "@effect/platform"
import type { TaskId } from "../../domain/ids.js"
import { isTaskId } from "../../domain/ids.js"
import type { TaskRecord } from "../../domain/Task.js"
import { timeMillis } from "../../domain/Task.js"
import { fromUtf8, utf8 } from "../../platform/durable.js"

export interface Layout {
  readonly root: string
  readonly secret: string
  readonly boot: string
  readonly tasks: string
  readonly queued: string
  readonly running: string
  /** The summary index's journals and snapshot (summaryIndex.ts). */
  readonly journal: string
  readonly summary: string
  readonly locks: string
  readonly workers: string
  /** One marker for each store instance that may have temp files in tasks/ (`writerMarkerName`). */
  readonly writers: string
  /** What must be this user's alone before anything in the root is trusted (trust.ts). */
  readonly private: { readonly directories: ReadonlyArray<string>; readonly files: ReadonlyArray<string> }
  readonly record: (taskId: TaskId) => string
  readonly queuedMarker: (record: TaskRecord) => string
  readonly runningMarker: (taskId: TaskId) => string
}

export const ConfigFileName = "config.json"
export const AuditDirectoryName = "audit"
export const TokenFileName = "dashboard.token"

export const layoutOf = (path: Path.Path, root: string): Layout => {
  const tasks = path.join(root, "tasks")
  const index = path.join(root, "index")
  const queued = path.join(index, "queued")
  const running = path.join(index, "running")
  const journal = path.join(index, "journal")
  const summary = path.join(index, "summary")
  const locks = path.join(root, "locks")
  const workers = path.join(root, "workers")
  const writers = path.join(root, "writers")
  const secret = path.join(root, "secret")
  const boot = path.join(root, "boot")
  return {
    root,
    secret,
    boot,
    tasks,
    queued,
    running,
    journal,
    summary,
    locks,
    workers,
    writers,
    private: {
      directories: [
        tasks,
        index,
        queued,
        running,
        journal,
        summary,
        locks,
        workers,
        writers,
        path.join(root, AuditDirectoryName)
      ],
      files: [secret, boot, path.join(root, ConfigFileName), path.join(root, TokenFileName)]
    },
    record: (taskId) => path.join(tasks, `${taskId}.json`),
    queuedMarker: (record) => path.join(queued, queuedMarkerName(record)),
    runningMarker: (taskId) => path.join(running, taskId)
  }
}

/** Creation time in milliseconds, zero-padded so that names sort in submission order. */
export const queuedMarkerName = (record: TaskRecord): string =>
  `${String(timeMillis(record.created_at)).padStart(15, "0")}-${record.task_id}`

/** The creation time a queued marker's name carries, in milliseconds. */
export const timeOfQueuedMarker = (name: string): number => Number(name.slice(0, 15))

/**
 * What a submit writes into the queued marker it creates before its record exists: its pid, so
 * that a pass meeting the marker without a record can tell a submit at work (its record about to
 * be linked) from a dead one's leftover. A line, so that a torn write is not read as a pid.
 */
export const submitterMarker = (pid: number): Uint8Array => utf8(`${pid}\n`)

/** The pid a submit wrote into its marker, or undefined (another marker, or a torn write). */
export const submitterOfMarker = (bytes: Uint8Array): number | undefined => {
  const match = /^([1-9][0-9]{0,9})\n$/.exec(fromUtf8(bytes))
  return match?.[1] === undefined ? undefined : Number(match[1])
}

export const taskIdOfQueuedMarker = (name: string): TaskId | undefined => {
  const taskId = name.slice(16)
  return name.length === 16 + 64 && name[15] === "-" && isTaskId(taskId) ? taskId : undefined
}

/**
 * The marker a store instance creates before its first temp file in tasks/ and removes when it
 * closes: one left by a process that is gone says tasks/ may hold its temp files, so the next open
 * sweeps them; without one, an open need not list tasks/, which can hold 100,000 names.
 */
export const writerMarkerName = (bootId: string, pid: number, token: string): string =>
  `${bootTagOf(bootId)}-${pid}-${token}`

/** Who left a writer marker; undefined for every other name. */
export const writerOfMarker = (name: string): { readonly boot: string; readonly pid: number } | undefined => {
  const match = /^([0-9A-Za-z]{1,16})-([1-9][0-9]{0,9})-[0-9a-f]{32}$/.exec(name)
  return match?.[1] === undefined || match[2] === undefined
    ? undefined
    : { boot: match[1], pid: Number(match[2]) }
}

/** The boot id as file names carry it: its letters and digits, at most 16. */
export const bootTagOf = (bootId: string): string =>
  bootId.replace(/[^0-9A-Za-z]/g, "").slice(0, 16) || "boot"

/** The instance named by `workers/<instance>.json`, or undefined for any other name. */
export const instanceOfWorkerFile = (name: string): string | undefined => {
  const match = /^([0-9a-f]{32})\.json$/.exec(name)
  return match?.[1]
}

export const taskIdOfRecordFile = (name: string): TaskId | undefined => {
  const taskId = name.slice(0, -".json".length)
  return name.endsWith(".json") && isTaskId(taskId) ? taskId : undefined
}
