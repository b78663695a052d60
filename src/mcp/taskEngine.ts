/**
 * `McpTasks` on the queue's `TaskStore`: MCP tasks that are RelayKeep tasks, so they outlive
 * the server process that created them. See services/McpTasks.ts for the contract and
 * docs/mcp.md ("MCP tasks") for the protocol as a client sees it. The tasks a server runs in
 * its own process are run by inServerTasks.ts.
 */
import { Clock, Effect, Layer, Option, Stream } from "effect"
import type { Scope } from "effect"
import { HashMismatch, InvalidInput, NotHeldHere, TaskFinished } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import type { McpTask } from "../domain/mcpTask.js"
import {
  InProcessProvider,
  isInProcessPayload,
  parseHandle,
  statusMessageOf,
  taskAnswer,
  toMcpTask
} from "../domain/mcpTask.js"
import type { TaskHandle } from "../domain/mcpTask.js"
import type { RecordHead } from "../domain/Task.js"
import { headOf, isTerminal, timeMillis } from "../domain/Task.js"
import { holderStatus } from "../worker/reap.js"
import { Host } from "../services/Host.js"
import { McpTasks } from "../services/McpTasks.js"
import { TaskStore } from "../services/TaskStore.js"
import { interrupted, LeaseMillis, makeInServerTasks } from "./inServerTasks.js"
import { changeSignal, PollMillis } from "./taskWait.js"

/** How long `tasks/cancel` waits for a running task to end before answering with it working. */
const CancelWaitMillis = 10_000
/** A server claims its own task within milliseconds of submitting it; one unclaimed this long lost it. */
const UnclaimedAfterMillis = 30_000
/** The page size of `tasks/list`. */
const ListPageSize = 50
/** How many tasks a server remembers it was asked about (for who runs each, and notifications). */
const KnownLimit = 10_000

export const makeMcpTasks: Effect.Effect<McpTasks["Type"], never, TaskStore | Host | Scope.Scope> =
  Effect.gen(function* () {
    const store = yield* TaskStore
    const host = yield* Host
    const inServer = yield* makeInServerTasks(store, host, yield* Effect.scope)
    /** Tasks this server created or was asked about, and whether a server (not a worker) runs each. */
    const known = new Map<TaskId, { readonly inServer: boolean; lastSent?: string }>()
    const remember = (taskId: TaskId, runsInServer: boolean) => {
      // Oldest first out: a long-lived server asked about many tasks forgets the earliest.
      if (known.size >= KnownLimit && !known.has(taskId)) {
        const oldest = known.keys().next()
        if (oldest.done !== true) known.delete(oldest.value)
      }
      known.set(taskId, { inServer: runsInServer })
    }

    const rememberCreated = (task: McpTask) =>
      Effect.sync(() => Option.map(parseHandle(task.taskId), (handle) => remember(handle.taskId, true)))

    const resolve = (text: string) =>
      Option.match(parseHandle(text), {
        onNone: () =>
          Effect.fail(
            new InvalidInput({ field: "taskId", reason: "must be a taskId this server returned (rk1-…)" })
          ),
        onSome: (handle) => Effect.succeed(handle)
      })

    const checked = (head: RecordHead, handle: TaskHandle) =>
      head.payload_sha256 === handle.payloadSha256
        ? Effect.succeed(head)
        : Effect.fail(new HashMismatch({ taskId: handle.taskId }))

    /** The task's record without its payload; the payload is read once, to learn who runs it. */
    const lookUp = (handle: TaskHandle) =>
      Effect.gen(function* () {
        const seen = known.get(handle.taskId)
        if (seen !== undefined)
          return { head: yield* checked(yield* store.peek(handle.taskId), handle), inServer: seen.inServer }
        const record = yield* store.record(handle.taskId)
        const head = yield* checked(headOf(record), handle)
        const runsInServer = isInProcessPayload(record.payload)
        remember(handle.taskId, runsInServer)
        return { head, inServer: runsInServer }
      })

    /**
     * End an in-server task whose server is gone: reaped when its lease's holder is dead (or
     * its lease expired), failed when it was never claimed. Says whether it changed anything.
     */
    const settleOrphan = (head: RecordHead) =>
      Effect.gen(function* () {
        if (inServer.runsHere(head.task_id)) return false
        const now = yield* Clock.currentTimeMillis
        if (head.state === "running" && head.lease !== null) {
          const lease = head.lease
          const status = yield* holderStatus(host, lease, now)
          if (status._tag === "live") return false
          yield* store
            .reap(head.task_id, lease, status.reason)
            .pipe(Effect.catchTag("StaleAttempt", () => Effect.void))
          return true
        }
        if (head.state === "queued" && now - timeMillis(head.created_at) > UnclaimedAfterMillis) {
          const claimed = yield* store.claim(head.task_id, {
            workerId: `relaykeep@${host.hostname}:${host.pid}`,
            leaseMillis: LeaseMillis
          })
          if (Option.isSome(claimed))
            yield* store
              .fail(
                head.task_id,
                claimed.value.lease,
                interrupted("the server that created it stopped before starting it")
              )
              .pipe(Effect.catchTag("StaleAttempt", () => Effect.void))
          return Option.isSome(claimed)
        }
        return false
      })

    /** The task as it is now, an in-server task whose server is gone ended first. */
    const current = (handle: TaskHandle) =>
      Effect.gen(function* () {
        const found = yield* lookUp(handle)
        if (!found.inServer || isTerminal(found.head.state)) return found
        return (yield* settleOrphan(found.head)) ? yield* lookUp(handle) : found
      })

    /** Wait until the task is finished, or `maxMillis` pass; `onLook` runs each time it is not. */
    const waitForEnd = (
      handle: TaskHandle,
      maxMillis: number,
      onLook: (head: RecordHead, inServer: boolean, waited: number) => Effect.Effect<void>
    ) =>
      Effect.scoped(
        Effect.gen(function* () {
          const nextChange = yield* changeSignal(store, handle.taskId)
          const started = yield* Clock.currentTimeMillis
          for (;;) {
            const found = yield* current(handle)
            const waited = (yield* Clock.currentTimeMillis) - started
            if (isTerminal(found.head.state) || waited >= maxMillis) return found
            yield* onLook(found.head, found.inServer, waited)
            yield* nextChange(Math.min(PollMillis, maxMillis - waited))
          }
        })
      )

    const changes = store.changes.pipe(
      Stream.filter((taskId) => known.has(taskId)),
      Stream.mapEffect((taskId) =>
        Effect.map(Effect.option(store.peek(taskId)), (head) => ({ taskId, head }))
      ),
      Stream.filterMap(({ taskId, head }) => {
        const seen = known.get(taskId)
        if (seen === undefined || Option.isNone(head)) return Option.none()
        const task = toMcpTask(head.value, seen.inServer)
        const key = `${task.status}\n${task.statusMessage}\n${task.lastUpdatedAt}`
        if (seen.lastSent === key) return Option.none()
        seen.lastSent = key
        return Option.some(task)
      })
    )

    return McpTasks.of({
      start: (task, work, onEnd) =>
        Effect.tap(inServer.start(task, work, onEnd ?? (() => Effect.void)), rememberCreated),
      hold: (task) => Effect.tap(inServer.hold(task), rememberCreated),
      settle: (text, outcome) =>
        Effect.gen(function* () {
          const handle = yield* resolve(text)
          yield* lookUp(handle)
          if (!inServer.runsHere(handle.taskId)) return yield* new NotHeldHere({ taskId: handle.taskId })
          // A cancel ends the attempt as cancelled only once it was asked for in the record.
          if (outcome._tag === "cancelled") yield* store.cancel(handle.taskId, handle.payloadSha256)
          yield* inServer.settle(handle.taskId, outcome)
        }),
      describe: (receipt) =>
        Effect.map(lookUp({ taskId: receipt.task_id, payloadSha256: receipt.payload_sha256 }), (found) =>
          toMcpTask(found.head, found.inServer)
        ),
      get: (text) =>
        Effect.flatMap(resolve(text), (handle) =>
          Effect.map(current(handle), (found) => toMcpTask(found.head, found.inServer))
        ),
      result: (text, progress) =>
        Effect.gen(function* () {
          const handle = yield* resolve(text)
          const found = yield* waitForEnd(handle, Number.POSITIVE_INFINITY, (head, inServer, waited) =>
            progress(waited / 1000, statusMessageOf(head, inServer))
          )
          return taskAnswer(yield* store.read(handle.taskId, handle.payloadSha256), found.inServer)
        }),
      list: (cursor) =>
        Effect.gen(function* () {
          const page = yield* store.list({ limit: ListPageSize, cursor })
          const tasks: Array<McpTask> = []
          for (const summary of page.tasks) {
            const head = yield* Effect.option(store.peek(summary.task_id))
            if (Option.isSome(head)) tasks.push(toMcpTask(head.value, summary.provider === InProcessProvider))
          }
          return page.next_cursor === null ? { tasks } : { tasks, nextCursor: page.next_cursor }
        }),
      cancel: (text) =>
        Effect.gen(function* () {
          const handle = yield* resolve(text)
          const before = yield* current(handle)
          if (isTerminal(before.head.state))
            return yield* new TaskFinished({ taskId: handle.taskId, state: before.head.state })
          const outcome = yield* store.cancel(handle.taskId, handle.payloadSha256)
          // Finished between the look and the cancel: refused all the same, nothing changed.
          if (!outcome.cancelled && !outcome.cancel_requested)
            return yield* new TaskFinished({ taskId: handle.taskId, state: outcome.state })
          if (outcome.cancel_requested) yield* inServer.stop(handle.taskId)
          const after = outcome.cancel_requested
            ? yield* waitForEnd(handle, CancelWaitMillis, () => Effect.void)
            : yield* lookUp(handle)
          return toMcpTask(after.head, after.inServer)
        }),
      changes
    })
  })

/** `McpTasks` on the `TaskStore` and `Host` in context; in-server tasks still running when it closes fail as interrupted. */
export const mcpTasksLayer: Layer.Layer<McpTasks, never, TaskStore | Host> = Layer.scoped(
  McpTasks,
  makeMcpTasks
)
