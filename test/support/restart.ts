/**
 * What must hold when a file store is reopened after its process failed or died mid-operation:
 * every acknowledged receipt reads back, no record is damaged, and after one pass the index
 * markers agree exactly with the live records. Checks return the violations they find, so a
 * test over many injection points can report all of them at once.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Cause, Chunk, Effect, Either, Exit } from "effect"
import type { Receipt, TaskState } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import type { HostOptions } from "./stores.js"

/** The process that meets the fault. */
export const crashingProcess: HostOptions = { pid: 1001, bootId: "boot-a" }
/** The next process on the same machine: same boot, and the first one's pid is dead. */
export const nextProcess: HostOptions = { pid: 1002, bootId: "boot-a", alive: new Set([1002]) }

/** Every way an exit breaks "every error is typed": a defect, an interruption, or a failure not in `allowed`. */
export const untypedErrors = <A, E extends { readonly _tag: string }>(
  exit: Exit.Exit<A, E>,
  allowed: ReadonlyArray<string>
): ReadonlyArray<string> =>
  Exit.isSuccess(exit)
    ? []
    : [
        ...Chunk.toReadonlyArray(Cause.defects(exit.cause)).map((defect) => `died: ${String(defect)}`),
        ...(Cause.isInterrupted(exit.cause) ? ["interrupted"] : []),
        ...Chunk.toReadonlyArray(Cause.failures(exit.cause))
          .filter((error) => !allowed.includes(error._tag))
          .map(
            (error) => `failed with ${error._tag}${"message" in error ? `: ${String(error.message)}` : ""}`
          )
      ]

/** The state of the task submitted under `clientRequestId`, as `state@attempt`, or "absent". */
export const stateOf = (store: TaskStoreShape, clientRequestId: string) =>
  Effect.map(store.list({ limit: 500 }), ({ tasks }) => {
    const task = tasks.find((t) => t.client_request_id === clientRequestId)
    return task === undefined ? "absent" : `${task.state}@${task.attempt}`
  })

const names = (fs: FileSystem.FileSystem, dir: string) =>
  fs.readDirectory(dir).pipe(Effect.orElseSucceed((): ReadonlyArray<string> => []))

/** The markers in the two index directories, as task ids. */
export const markers = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const queued = yield* names(fs, path.join(root, "index", "queued"))
    const running = yield* names(fs, path.join(root, "index", "running"))
    // A queued marker is `<15-digit ms>-<task id>`.
    return { queued: queued.map((name) => name.slice(16)), running }
  }).pipe(Effect.provide(nodeContextLayer))

/** Files in `<root>/<dir>` whose name starts with `.tmp-`. */
export const tempFiles = (root: string, dir: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    return (yield* names(fs, path.join(root, dir))).filter((name) => name.startsWith(".tmp-"))
  }).pipe(Effect.provide(nodeContextLayer))

/** Lock files in `<root>/locks`: neither temp files nor break guards. */
export const lockFiles = (root: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const all = yield* names(fs, path.join(root, "locks"))
    return all.filter((name) => !name.startsWith(".tmp-") && !name.includes(".break-"))
  }).pipe(Effect.provide(nodeContextLayer))

/**
 * Check a freshly reopened store: acknowledged receipts, damaged records, stray temp files,
 * and (after one `live`) the marker invariant in both directions.
 */
export const restartViolations = (
  store: TaskStoreShape,
  root: string,
  acknowledged: ReadonlyArray<Receipt>
) =>
  Effect.gen(function* () {
    const problems: Array<string> = []
    for (const receipt of acknowledged) {
      const view = yield* Effect.either(store.read(receipt.task_id, receipt.payload_sha256))
      if (Either.isLeft(view)) problems.push(`acknowledged ${receipt.task_id} is lost: ${view.left._tag}`)
      else if (view.right.created_at !== receipt.created_at)
        problems.push(`receipt ${receipt.task_id} changed`)
    }
    const report = yield* store.check
    for (const bad of report.invalid_records) problems.push(`damaged record ${bad.file}: ${bad.reason}`)
    for (const dir of ["tasks", "locks"]) {
      const strays = yield* tempFiles(root, dir)
      if (strays.length > 0) problems.push(`temp files left in ${dir}/: ${strays.join(", ")}`)
    }
    const live = yield* store.live
    const { tasks } = yield* store.list({ limit: 500 })
    const index = yield* markers(root)
    const states = new Map<string, TaskState>(tasks.map((task) => [task.task_id, task.state]))
    for (const task of tasks) {
      if (task.state === "queued" && !live.queued.includes(task.task_id))
        problems.push(`queued ${task.task_id} is not in live.queued`)
      if (task.state === "queued" && !index.queued.includes(task.task_id))
        problems.push(`queued ${task.task_id} has no queued marker`)
      if (task.state === "running" && !live.running.some((r) => r.task_id === task.task_id))
        problems.push(`running ${task.task_id} is not in live.running`)
      if (task.state === "running" && !index.running.includes(task.task_id))
        problems.push(`running ${task.task_id} has no running marker`)
    }
    const stray = (dir: TaskState, ids: ReadonlyArray<string>) =>
      ids.flatMap((id) => {
        const state = states.get(id)
        return state === dir ? [] : [`index/${dir} marker for a ${state ?? "missing"} record ${id}`]
      })
    problems.push(...stray("queued", index.queued), ...stray("running", index.running))
    return problems
  })
