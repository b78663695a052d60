/**
 * `McpTasks` on the queue's `TaskStore`: MCP tasks that are RelayKeep tasks, so they outlive
 * the server process that created them. See services/McpTasks.ts for the contract and
 * docs/mcp.md ("Tasks") for the protocol as a client sees it.
 */
import { Clock, Deferred, Effect, Either, Fiber, Layer, Option, Schema, Stream } from "effect"
import type { Scope } from "effect"
import { HashMismatch, InvalidInput, NotHeldHere, TaskFinished } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import { ClientRequestId } from "../domain/ids.js"
import { JsonValue } from "../domain/fields.js"
import type { InServerOutcome, McpTask, McpToolResult } from "../domain/mcpTask.js"
import {
  InProcessProvider,
  isInProcessPayload,
  parseHandle,
  statusMessageOf,
  taskAnswer,
  toMcpTask
} from "../domain/mcpTask.js"
import type { TaskHandle } from "../domain/mcpTask.js"
import { MaxMessageChars, truncate } from "../domain/provider.js"
import type { Lease, RecordHead, TaskError } from "../domain/Task.js"
import { headOf, isTerminal, timeMillis } from "../domain/Task.js"
import { leaseStatus } from "../domain/transitions.js"
import { Host } from "../services/Host.js"
import { McpTasks } from "../services/McpTasks.js"
import type { InServerTask, WorkFailure } from "../services/McpTasks.js"
import { TaskStore } from "../services/TaskStore.js"
import { changeSignal, PollMillis } from "./taskWait.js"

/** An in-server task's lease; heartbeats renew it long before it runs out. */
const LeaseMillis = 30_000
const HeartbeatEveryMillis = 10_000
/** How often a running in-server task looks for a cancel request made by another process. */
const CancelPollMillis = 1_000
/** How long `tasks/cancel` waits for a running task to end before answering with it working. */
const CancelWaitMillis = 10_000
/** A server claims its own task within milliseconds of submitting it; one unclaimed this long lost it. */
const UnclaimedAfterMillis = 30_000
/** The page size of `tasks/list`. */
const ListPageSize = 50

type Ending = InServerOutcome | { readonly _tag: "cancelled" }

/** An in-server task this process runs. */
interface Running {
  /** The lease it runs under, renewed by each heartbeat. */
  lease: Lease
  /** Completed to stop the work at once (a cancel made through this process). */
  readonly stop: Deferred.Deferred<void>
  /** The outcome of a held task, reported by `settle`. */
  readonly reported: Deferred.Deferred<Ending>
  /** Completed once the outcome is written (or given up). */
  readonly ended: Deferred.Deferred<void>
  /** The fiber that supervises it, once forked. */
  fiber?: Fiber.RuntimeFiber<void>
}

const interrupted = (message: string): TaskError => ({ tag: "Interrupted", message, retryable: false })

const asJson = Schema.decodeUnknownEither(JsonValue)

export const makeMcpTasks: Effect.Effect<McpTasks["Type"], never, TaskStore | Host | Scope.Scope> =
  Effect.gen(function* () {
    const store = yield* TaskStore
    const host = yield* Host
    const scope = yield* Effect.scope
    /** Tasks this server created or was asked about, and whether a server (not a worker) runs each. */
    const known = new Map<TaskId, { readonly inServer: boolean; lastSent?: string }>()
    const running = new Map<TaskId, Running>()

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
        const inServer = isInProcessPayload(record.payload)
        known.set(handle.taskId, { inServer })
        return { head, inServer }
      })

    const claimAsServer = (taskId: TaskId, server: string) =>
      store.claim(taskId, { workerId: `${server}@${host.hostname}:${host.pid}`, leaseMillis: LeaseMillis })

    /**
     * End an in-server task whose server is gone: reaped when its lease's holder is dead (or
     * its lease expired), failed when it was never claimed. Says whether it changed anything.
     */
    const settleOrphan = (head: RecordHead) =>
      Effect.gen(function* () {
        if (running.has(head.task_id)) return false
        const now = yield* Clock.currentTimeMillis
        if (head.state === "running" && head.lease !== null) {
          const lease = head.lease
          const alive = lease.host === host.hostname ? yield* host.isAlive(lease.pid) : true
          const status = leaseStatus(lease, now, { host: host.hostname, boot_id: host.bootId }, alive)
          if (status._tag === "live") return false
          yield* store
            .reap(head.task_id, lease, status.reason)
            .pipe(Effect.catchTag("StaleAttempt", () => Effect.void))
          return true
        }
        if (head.state === "queued" && now - timeMillis(head.created_at) > UnclaimedAfterMillis) {
          const claimed = yield* claimAsServer(head.task_id, "relaykeep")
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

    /**
     * Run an in-server task to its end under `lease`: heartbeat it, stop `work` when a cancel
     * is asked for, and write what it ended with. Interrupted (the server is stopping), it
     * fails the task as interrupted.
     */
    const supervise = (taskId: TaskId, work: Effect.Effect<Ending>, self: Running) => {
      const watch = Effect.gen(function* () {
        let sinceBeat = 0
        for (;;) {
          const stopped = yield* Deferred.await(self.stop).pipe(
            Effect.as(true),
            Effect.timeoutTo({ duration: CancelPollMillis, onSuccess: () => true, onTimeout: () => false })
          )
          if (stopped) return "cancel" as const
          sinceBeat += CancelPollMillis
          const look =
            sinceBeat >= HeartbeatEveryMillis
              ? Effect.map(store.heartbeat(taskId, self.lease, LeaseMillis), (beat) => {
                  sinceBeat = 0
                  self.lease = beat.lease
                  return beat.cancelRequested
                })
              : Effect.map(store.peek(taskId), (head) => head.cancel_requested_at !== undefined)
          const seen = yield* Effect.either(look)
          if (Either.isRight(seen)) {
            if (seen.right) return "cancel" as const
          } else if (seen.left._tag === "StaleAttempt" || seen.left._tag === "UnknownTask") {
            return "lost" as const
          } else {
            yield* Effect.logWarning(`task ${taskId}: ${seen.left.message}; looking again`)
          }
        }
      })
      const write = (ending: Ending) => {
        switch (ending._tag) {
          case "complete":
            return store.complete(taskId, self.lease, ending.result)
          case "failed":
            return store.fail(taskId, self.lease, {
              tag: ending.error.tag,
              message: truncate(ending.error.message, MaxMessageChars),
              retryable: false
            })
          case "cancelled":
            return store.stopCancelled(taskId, self.lease)
        }
      }
      const body = Effect.gen(function* () {
        const ended = yield* Effect.raceFirst(
          Effect.map(work, (ending) => ({ _tag: "ended" as const, ending })),
          Effect.map(watch, (signal) => ({ _tag: signal }))
        )
        if (ended._tag === "lost") {
          yield* Effect.logWarning(`task ${taskId} was taken from this server; its work was stopped`)
          return
        }
        yield* Effect.uninterruptible(
          write(ended._tag === "ended" ? ended.ending : { _tag: "cancelled" })
        ).pipe(
          Effect.catchAll((error) =>
            Effect.logError(`task ${taskId}: its outcome was not written: ${error.message}`)
          )
        )
      })
      return Effect.interruptible(body).pipe(
        Effect.onInterrupt(() => failInterrupted(taskId, self)),
        Effect.ensuring(
          Effect.zipRight(
            Deferred.succeed(self.ended, undefined),
            Effect.sync(() => running.delete(taskId))
          )
        )
      )
    }

    /** Fail a task this process runs as interrupted by the end of the server, unless it ended. */
    const failInterrupted = (taskId: TaskId, self: Running) =>
      store.fail(taskId, self.lease, interrupted("the server stopped before the tool finished")).pipe(
        Effect.catchTag("StaleAttempt", () => Effect.void),
        Effect.ignoreLogged
      )

    // Closing the engine stops every task it runs; one whose supervisor never got to start is
    // failed here, so that no task of this process is left running under a lease nobody renews.
    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        [...running.entries()],
        ([taskId, self]) =>
          Effect.gen(function* () {
            if (self.fiber !== undefined) yield* Fiber.interrupt(self.fiber)
            if (!(yield* Deferred.isDone(self.ended))) yield* failInterrupted(taskId, self)
          }),
        { discard: true }
      )
    )

    /** Submit an in-server task and claim it as this server, then run `work` under it in the background. */
    const open = (task: InServerTask, work: (taskId: TaskId, self: Running) => Effect.Effect<Ending>) =>
      Effect.gen(function* () {
        const token = yield* host.token
        const clientRequestId = yield* Schema.decodeUnknown(ClientRequestId)(
          `mcp:${task.server.slice(0, 100)}:${token}`
        ).pipe(
          Effect.mapError(() => new InvalidInput({ field: "server", reason: "must be a printable name" }))
        )
        const payload = {
          provider: InProcessProvider,
          server: task.server,
          tool: task.tool,
          arguments: Either.getOrNull(asJson(task.arguments))
        }
        const receipt = yield* store.submit({ clientRequestId, payload, ttlMillis: task.ttl })
        known.set(receipt.task_id, { inServer: true })
        // Claimed under a mask: nothing may stop this process between its claim and its supervisor.
        return yield* Effect.uninterruptible(
          Effect.gen(function* () {
            const claimed = yield* claimAsServer(receipt.task_id, task.server)
            if (Option.isNone(claimed)) return toMcpTask(yield* store.peek(receipt.task_id), true)
            const self: Running = {
              lease: claimed.value.lease,
              stop: yield* Deferred.make<void>(),
              reported: yield* Deferred.make<Ending>(),
              ended: yield* Deferred.make<void>()
            }
            running.set(receipt.task_id, self)
            self.fiber = yield* Effect.forkIn(
              supervise(receipt.task_id, work(receipt.task_id, self), self),
              scope
            )
            return toMcpTask(headOf(claimed.value.record), true)
          })
        )
      })

    const asEnding = (work: Effect.Effect<McpToolResult, WorkFailure>): Effect.Effect<Ending> =>
      Effect.match(work, {
        onSuccess: (result): Ending => ({ _tag: "complete", result }),
        onFailure: (failure): Ending => ({
          _tag: "failed",
          error: { tag: failure._tag, message: failure.message }
        })
      })

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
      start: (task, work) => open(task, (taskId) => asEnding(work(taskId))),
      hold: (task) => open(task, (_, self) => Deferred.await(self.reported)),
      settle: (text, outcome) =>
        Effect.gen(function* () {
          const handle = yield* resolve(text)
          yield* lookUp(handle)
          const self = running.get(handle.taskId)
          if (self === undefined) return yield* new NotHeldHere({ taskId: handle.taskId })
          // A cancel ends the attempt as cancelled only once it was asked for in the record.
          if (outcome._tag === "cancelled") yield* store.cancel(handle.taskId, handle.payloadSha256)
          yield* Deferred.succeed(self.reported, outcome)
          yield* Deferred.await(self.ended)
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
          if (outcome.cancel_requested) {
            const self = running.get(handle.taskId)
            if (self !== undefined) yield* Deferred.succeed(self.stop, undefined)
          }
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
