/**
 * The tasks an MCP server runs in its own process (a toolkit tool called as a task): each is a
 * RelayKeep task of the provider `mcp-tool`, submitted and claimed by the server before the
 * client hears of it, heartbeated while its work runs, and ended with what the work produced, a
 * cancel, or (when the server stops first) as interrupted. Part of `mcpTasksLayer`.
 */
import { Cause, Deferred, Effect, Either, Exit, Fiber, Option, Schedule, Schema } from "effect"
import type { Scope } from "effect"
import type { InvalidRecord, UnknownTask } from "../domain/errors.js"
import { InvalidInput, NotHeldHere, StaleAttempt, StorageError } from "../domain/errors.js"
import { JsonValue } from "../domain/fields.js"
import type { TaskId } from "../domain/ids.js"
import { ClientRequestId } from "../domain/ids.js"
import type { InServerEnd, InServerOutcome, McpTask, McpToolResult } from "../domain/mcpTask.js"
import { InProcessProvider, toMcpTask } from "../domain/mcpTask.js"
import { MaxMessageChars, truncate } from "../domain/provider.js"
import type { Lease, TaskError } from "../domain/Task.js"
import { headOf } from "../domain/Task.js"
import type { Host } from "../services/Host.js"
import type { InServerTask, TaskCreateError, WorkFailure } from "../services/McpTasks.js"
import type { TaskStoreShape } from "../services/TaskStore.js"

/** An in-server task's lease; heartbeats renew it long before it runs out. */
export const LeaseMillis = 30_000
const HeartbeatEveryMillis = 10_000
/** How often a running in-server task looks for a cancel request made by another process. */
const CancelPollMillis = 1_000
/** How long a server keeps trying to claim the task it just submitted while another process holds it. */
const ClaimTries = 40
const ClaimRetryMillis = 50

type Ending = InServerOutcome | { readonly _tag: "cancelled" }
type WriteError = StaleAttempt | UnknownTask | InvalidRecord | StorageError

/** An in-server task this process runs. */
interface Running {
  /** The lease it runs under, renewed by each heartbeat. */
  lease: Lease
  /** Completed to stop the work at once (a cancel made through this process). */
  readonly stop: Deferred.Deferred<void>
  /** The outcome of a held task, reported by `settle`. */
  readonly reported: Deferred.Deferred<Ending>
  /** Completed once the outcome is written, or failed with why it could not be. */
  readonly written: Deferred.Deferred<void, WriteError>
  /** The fiber that supervises it, once forked. */
  fiber?: Fiber.RuntimeFiber<void>
}

export const interrupted = (message: string): TaskError => ({ tag: "Interrupted", message, retryable: false })

const asJson = Schema.decodeUnknownEither(JsonValue)

/** A write that failed on the storage is tried again a few times before the outcome is given up. */
const retried = <A>(write: Effect.Effect<A, WriteError>) =>
  Effect.retry(write, {
    schedule: Schedule.exponential("100 millis"),
    times: 5,
    while: (error) => error._tag === "StorageError"
  })

/** What a task's end means for whoever audits it, from the outcome as written. */
const endOf = (ending: Ending, written: Exit.Exit<void, WriteError>): InServerEnd =>
  Exit.isSuccess(written)
    ? ending
    : Option.match(Cause.failureOption(written.cause), {
        onNone: () => ({ _tag: "interrupted" }),
        onSome: (error) =>
          error._tag === "StaleAttempt" ? { _tag: "lost" } : { _tag: "unwritten", reason: error.message }
      })

export const makeInServerTasks = (store: TaskStoreShape, host: Host["Type"], scope: Scope.Scope) =>
  Effect.gen(function* () {
    const running = new Map<TaskId, Running>()

    const claimAsServer = (taskId: TaskId, server: string) =>
      store.claim(taskId, { workerId: `${server}@${host.hostname}:${host.pid}`, leaseMillis: LeaseMillis })

    /**
     * Claim the task this server just submitted. The claim skips a task another process holds
     * that instant (a worker's walk of the queue looks at new markers), so it is tried again
     * while the task is still queued; none when it is queued no more (cancelled meanwhile).
     */
    const claimOwn = (taskId: TaskId, server: string) =>
      Effect.gen(function* () {
        for (let tries = 1; ; tries++) {
          const claimed = yield* claimAsServer(taskId, server)
          if (Option.isSome(claimed)) return claimed
          if ((yield* store.peek(taskId)).state !== "queued") return claimed
          if (tries === ClaimTries) {
            // Never left queued for nobody: cancelled, and the call fails saying why.
            yield* store.cancel(taskId, (yield* store.peek(taskId)).payload_sha256)
            return yield* new StorageError({
              operation: "claim",
              path: taskId,
              reason: `another process held the new task for ${ClaimTries * ClaimRetryMillis} ms; it was cancelled`
            })
          }
          yield* Effect.sleep(ClaimRetryMillis)
        }
      })

    /** Fail a task this process runs as interrupted by the end of the server, unless it ended. */
    const failInterrupted = (taskId: TaskId, self: Running) =>
      store.fail(taskId, self.lease, interrupted("the server stopped before the tool finished")).pipe(
        Effect.catchTag("StaleAttempt", () => Effect.void),
        Effect.ignoreLogged
      )

    /**
     * Run an in-server task to its end: heartbeat it, stop `work` when a cancel is asked for,
     * write what it ended with (tried again on a storage error), then tell `onEnd`.
     */
    const supervise = (
      taskId: TaskId,
      work: Effect.Effect<Ending>,
      self: Running,
      onEnd: (end: InServerEnd) => Effect.Effect<void>
    ) => {
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
      const write = (ending: Ending): Effect.Effect<void, WriteError> => {
        switch (ending._tag) {
          case "complete":
            return Effect.asVoid(store.complete(taskId, self.lease, ending.result))
          case "failed":
            return Effect.asVoid(
              store.fail(taskId, self.lease, {
                tag: ending.error.tag,
                message: truncate(ending.error.message, MaxMessageChars),
                retryable: false
              })
            )
          case "cancelled":
            return Effect.asVoid(store.stopCancelled(taskId, self.lease))
        }
      }
      const body = Effect.gen(function* () {
        const ended = yield* Effect.raceFirst(
          Effect.map(work, (ending) => ({ _tag: "ended" as const, ending })),
          Effect.map(watch, (signal) => ({ _tag: signal }))
        )
        if (ended._tag === "lost") {
          yield* Effect.logWarning(`task ${taskId} was taken from this server; its work was stopped`)
          yield* Deferred.fail(
            self.written,
            new StaleAttempt({
              taskId,
              attempt: self.lease.attempt,
              reason: "another process ended the task"
            })
          )
          return yield* onEnd({ _tag: "lost" })
        }
        const ending: Ending = ended._tag === "ended" ? ended.ending : { _tag: "cancelled" }
        const written = yield* Effect.exit(
          Effect.uninterruptible(retried(Effect.suspend(() => write(ending))))
        )
        if (Exit.isFailure(written))
          yield* Effect.logError(`task ${taskId}: its outcome was not written`, written.cause)
        yield* Deferred.done(self.written, written)
        yield* onEnd(endOf(ending, written))
      })
      // Forked from an uninterruptible region, the fiber starts uninterruptible: its handlers
      // are in place before anything can stop it. Only its body may be interrupted.
      return Effect.interruptible(body).pipe(
        Effect.onInterrupt(() =>
          Effect.zipRight(failInterrupted(taskId, self), onEnd({ _tag: "interrupted" }))
        ),
        Effect.ensuring(
          Effect.zipRight(
            Deferred.fail(
              self.written,
              new StorageError({ operation: "settle", path: taskId, reason: "interrupted" })
            ),
            Effect.sync(() => running.delete(taskId))
          )
        )
      )
    }

    // Closing the engine stops every task it runs; one whose supervisor never got to start is
    // failed here, so that no task of this process is left running under a lease nobody renews.
    yield* Effect.addFinalizer(() =>
      Effect.forEach(
        [...running.entries()],
        ([taskId, self]) =>
          Effect.gen(function* () {
            if (self.fiber !== undefined) yield* Fiber.interrupt(self.fiber)
            if (!(yield* Deferred.isDone(self.written))) yield* failInterrupted(taskId, self)
          }),
        { discard: true }
      )
    )

    /**
     * Submit an in-server task and claim it as this server, then run `work` under it in the
     * background. Durable, and claimed, before this returns.
     */
    const open = (
      task: InServerTask,
      work: (taskId: TaskId, self: Running) => Effect.Effect<Ending>,
      onEnd: (taskId: TaskId, end: InServerEnd) => Effect.Effect<void>
    ): Effect.Effect<McpTask, TaskCreateError> =>
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
        // Claimed under a mask: nothing may stop this process between its claim and its supervisor.
        return yield* Effect.uninterruptible(
          Effect.gen(function* () {
            const claimed = yield* claimOwn(receipt.task_id, task.server)
            if (Option.isNone(claimed)) return toMcpTask(yield* store.peek(receipt.task_id), true)
            const self: Running = {
              lease: claimed.value.lease,
              stop: yield* Deferred.make<void>(),
              reported: yield* Deferred.make<Ending>(),
              written: yield* Deferred.make<void, WriteError>()
            }
            running.set(receipt.task_id, self)
            self.fiber = yield* Effect.forkIn(
              supervise(receipt.task_id, work(receipt.task_id, self), self, (end) =>
                onEnd(receipt.task_id, end)
              ),
              scope
            )
            return toMcpTask(headOf(claimed.value.record), true)
          })
        )
      })

    return {
      start: (
        task: InServerTask,
        work: (taskId: TaskId) => Effect.Effect<McpToolResult, WorkFailure>,
        onEnd: (taskId: TaskId, end: InServerEnd) => Effect.Effect<void>
      ) =>
        open(
          task,
          (taskId) =>
            Effect.match(work(taskId), {
              onSuccess: (result): Ending => ({ _tag: "complete", result }),
              onFailure: (failure): Ending => ({
                _tag: "failed",
                error: { tag: failure._tag, message: failure.message }
              })
            }),
          onEnd
        ),
      /** A task whose outcome `settle` reports. */
      hold: (task: InServerTask) =>
        open(
          task,
          (_, self) => Deferred.await(self.reported),
          () => Effect.void
        ),
      /** Stop the work of a task this process runs at once, if it runs here. */
      stop: (taskId: TaskId) =>
        Option.match(Option.fromNullable(running.get(taskId)), {
          onNone: () => Effect.void,
          onSome: (self) => Effect.asVoid(Deferred.succeed(self.stop, undefined))
        }),
      runsHere: (taskId: TaskId) => running.has(taskId),
      /** Report the outcome of a held task; done once it is written. */
      settle: (taskId: TaskId, outcome: Ending) =>
        Effect.gen(function* () {
          const self = running.get(taskId)
          if (self === undefined) return yield* new NotHeldHere({ taskId })
          yield* Deferred.succeed(self.reported, outcome)
          yield* Deferred.await(self.written).pipe(
            Effect.catchTag("StaleAttempt", () => Effect.fail(new NotHeldHere({ taskId })))
          )
        })
    }
  })
