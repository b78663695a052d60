/**
 * McpTasks on the memory store (src/mcp/taskEngine.ts): in-server tasks run, fail, are held and
 * settled, cancelled at once, heartbeated, failed as interrupted when their engine closes or
 * their server is gone, and never claimed by a worker; handles are checked like receipts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Option, Scope, Stream, TestClock } from "effect"
import { StorageError } from "../../src/domain/errors.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { formatHandle, InProcessProvider, okAnswer, parseHandle } from "../../src/domain/mcpTask.js"
import type { McpTask } from "../../src/domain/mcpTask.js"
import { makeMcpTasks } from "../../src/mcp/taskEngine.js"
import { echoProviderLayer } from "../../src/providers/layer.js"
import { Host } from "../../src/services/Host.js"
import type { InServerTask } from "../../src/services/McpTasks.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"
import { runPass } from "../../src/worker/pass.js"

const here = { pid: 300, hostname: "here", bootId: "boot-1" }
const store = memoryTaskStoreLayer().pipe(Layer.provideMerge(Host.layerTest(here)))
const call: InServerTask = { server: "test-server", tool: "slow", arguments: { n: 1 }, ttl: 60_000 }

/** An engine in the current scope, on the store and host in context. */
const engine = makeMcpTasks

/** The RelayKeep task id and hash of a task. */
const handleOf = (task: McpTask) =>
  Option.getOrThrowWith(parseHandle(task.taskId), () => new Error(`not a handle: ${task.taskId}`))

/** Wait (live) until the task's record is no longer running. */
const recordWhenFinished = (task: McpTask) =>
  Effect.gen(function* () {
    const tasks = yield* TaskStore
    const { taskId } = handleOf(task)
    for (;;) {
      const head = yield* tasks.peek(taskId)
      if (head.state !== "running" && head.state !== "queued") return head
      yield* Effect.sleep(Duration.millis(5))
    }
  })

describe("McpTasks", () => {
  it.scopedLive(
    "a started task runs in the background; its result completes it and tasks/result answers with it",
    () =>
      Effect.gen(function* () {
        const tasks = yield* engine
        const gate = yield* Deferred.make<void>()
        const created = yield* tasks.start(call, () =>
          Effect.as(Deferred.await(gate), okAnswer({ counted: 3 }))
        )
        assert.strictEqual(created.status, "working")
        assert.strictEqual(created.ttl, 60_000)
        assert.match(created.statusMessage, /^running on server test-server@here:300$/)
        const record = yield* Effect.flatMap(TaskStore, (queue) => queue.record(handleOf(created).taskId))
        assert.deepStrictEqual(record.payload, {
          provider: InProcessProvider,
          server: "test-server",
          tool: "slow",
          arguments: { n: 1 }
        })
        assert.strictEqual(record.ttl_ms, 60_000)
        const answer = yield* Effect.fork(tasks.result(created.taskId, () => Effect.void))
        yield* Deferred.succeed(gate, undefined)
        assert.deepStrictEqual(yield* Fiber.join(answer), okAnswer({ counted: 3 }))
        const done = yield* tasks.get(created.taskId)
        assert.strictEqual(done.status, "completed")
        assert.isUndefined(done.pollInterval)
      }).pipe(Effect.provide(store))
  )

  it.scopedLive("a failure of the work fails the task with its tag and message", () =>
    Effect.gen(function* () {
      const tasks = yield* engine
      const created = yield* tasks.start(call, () => Effect.fail({ _tag: "Boom", message: "it broke" }))
      const head = yield* recordWhenFinished(created)
      assert.strictEqual(head.state, "failed")
      assert.deepStrictEqual(head.error, { tag: "Boom", message: "it broke", retryable: false })
      assert.strictEqual((yield* tasks.get(created.taskId)).statusMessage, "failed: Boom: it broke")
      const answer = yield* tasks.result(created.taskId, () => Effect.void)
      assert.deepStrictEqual(answer, { content: [{ type: "text", text: "Boom: it broke" }], isError: true })
    }).pipe(Effect.provide(store))
  )

  it.scopedLive("a held task ends with what settle reports, durable when settle returns", () =>
    Effect.gen(function* () {
      const tasks = yield* engine
      const queue = yield* TaskStore
      const completed = yield* tasks.hold(call)
      yield* tasks.settle(completed.taskId, { _tag: "complete", result: okAnswer({ ok: true }) })
      assert.strictEqual((yield* queue.peek(handleOf(completed).taskId)).state, "complete")
      const failed = yield* tasks.hold(call)
      yield* tasks.settle(failed.taskId, { _tag: "failed", error: { tag: "ToolError", message: "no" } })
      assert.strictEqual((yield* queue.peek(handleOf(failed).taskId)).state, "failed")
      const cancelled = yield* tasks.hold(call)
      yield* tasks.settle(cancelled.taskId, { _tag: "cancelled" })
      assert.strictEqual((yield* queue.peek(handleOf(cancelled).taskId)).state, "cancelled")
      // Settled twice: this process no longer runs it.
      const again = yield* Effect.flip(tasks.settle(completed.taskId, { _tag: "cancelled" }))
      assert.strictEqual(again._tag, "NotHeldHere")
    }).pipe(Effect.provide(store))
  )

  it.scopedLive(
    "tasks/cancel stops work this process runs at once and answers cancelled; a finished task is refused",
    () =>
      Effect.gen(function* () {
        const tasks = yield* engine
        const stopped = yield* Deferred.make<void>()
        const created = yield* tasks.start(call, () =>
          Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(stopped, undefined)))
        )
        const cancelled = yield* tasks.cancel(created.taskId)
        assert.strictEqual(cancelled.status, "cancelled")
        assert.isTrue(yield* Deferred.isDone(stopped), "the work was interrupted")
        const refused = yield* Effect.flip(tasks.cancel(created.taskId))
        assert.strictEqual(refused._tag, "TaskFinished")
      }).pipe(Effect.provide(store))
  )

  it.scopedLive("a forged handle fails as a wrong hash does; a malformed one names the field", () =>
    Effect.gen(function* () {
      const tasks = yield* engine
      const created = yield* tasks.hold(call)
      const { payloadSha256, taskId } = handleOf(created)
      const flipped = `${payloadSha256.slice(0, -1)}${payloadSha256.endsWith("0") ? "1" : "0"}`
      const forged = yield* Effect.flip(tasks.get(`rk1-${taskId}-${flipped}`))
      assert.strictEqual(forged._tag, "HashMismatch")
      const malformed = yield* Effect.flip(tasks.get("rk1-nothing"))
      assert.strictEqual(malformed._tag, "InvalidInput")
      assert.strictEqual(malformed.message, "taskId: must be a taskId this server returned (rk1-…)")
      // A forged cancel changes nothing.
      yield* Effect.flip(tasks.cancel(`rk1-${taskId}-${flipped}`))
      assert.strictEqual((yield* tasks.get(created.taskId)).status, "working")
    }).pipe(Effect.provide(store))
  )

  it.scopedLive("closing the engine fails the tasks it still runs as interrupted", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const tasks = yield* Scope.extend(engine, scope)
      const created = yield* tasks.start(call, () => Effect.never)
      yield* Scope.close(scope, Exit.void)
      const head = yield* Effect.flatMap(TaskStore, (queue) => queue.peek(handleOf(created).taskId))
      assert.strictEqual(head.state, "failed")
      assert.deepStrictEqual(head.error, {
        tag: "Interrupted",
        message: "the server stopped before the tool finished",
        retryable: false
      })
    }).pipe(Effect.provide(store))
  )

  it.scopedLive(
    "a task whose server process is gone is reported failed (interrupted) by another server",
    () =>
      Effect.gen(function* () {
        const queue = yield* TaskStore
        const created = yield* engine.pipe(
          Effect.flatMap((tasks) => tasks.hold(call)),
          Effect.provide(Host.layerTest({ ...here, pid: 300 }))
        )
        // Another server on this host, to whom pid 300 is dead.
        const other = yield* engine.pipe(Effect.provide(Host.layerTest({ ...here, pid: 301 })))
        const seen = yield* other.get(created.taskId)
        assert.strictEqual(seen.status, "failed")
        assert.match(
          seen.statusMessage,
          /^failed: interrupted: the server running it stopped before it finished \(/
        )
        const head = yield* queue.peek(handleOf(created).taskId)
        assert.strictEqual(head.error?.tag, "worker_lost")
      }).pipe(Effect.provide(store))
  )

  it.scoped(
    "a server heartbeats its task; one never claimed by its server is failed once it is 30 s old",
    () =>
      Effect.gen(function* () {
        const queue = yield* TaskStore
        const tasks = yield* engine
        const created = yield* tasks.hold(call)
        const { taskId } = handleOf(created)
        const first = (yield* queue.peek(taskId)).lease?.expires_at
        yield* TestClock.adjust(Duration.seconds(11))
        const renewed = (yield* queue.peek(taskId)).lease?.expires_at
        assert.isTrue(
          first !== undefined && renewed !== undefined && renewed > first,
          "the lease was renewed"
        )

        const orphan = yield* queue.submit({
          clientRequestId: ClientRequestId.make("mcp:gone:1"),
          payload: { provider: InProcessProvider, server: "gone", tool: "slow", arguments: null }
        })
        const handle = formatHandle({ taskId: orphan.task_id, payloadSha256: orphan.payload_sha256 })
        assert.strictEqual(
          (yield* tasks.get(handle)).status,
          "working",
          "young: its server may still claim it"
        )
        yield* TestClock.adjust(Duration.seconds(31))
        const failed = yield* tasks.get(handle)
        assert.strictEqual(failed.status, "failed")
        assert.strictEqual(
          failed.statusMessage,
          "failed: Interrupted: the server that created it stopped before starting it"
        )
      }).pipe(Effect.provide(store))
  )

  it.effect("a worker pass never claims a queued in-server task", () =>
    Effect.gen(function* () {
      const queue = yield* TaskStore
      const orphan = yield* queue.submit({
        clientRequestId: ClientRequestId.make("mcp:server:2"),
        payload: { provider: InProcessProvider, server: "server", tool: "slow", arguments: null }
      })
      const echo = yield* queue.submit({ clientRequestId: ClientRequestId.make("plain"), payload: { n: 1 } })
      const report = yield* runPass({ workerId: "w", leaseMillis: 60_000 })
      assert.deepStrictEqual(report.dispatched, [echo.task_id])
      assert.strictEqual((yield* queue.peek(orphan.task_id)).state, "queued")
    }).pipe(Effect.provide(Layer.merge(store, echoProviderLayer)))
  )

  it.scopedLive(
    "a claim that finds its new task busy is tried again; one busy for 2 s cancels the task and fails the call",
    () =>
      Effect.gen(function* () {
        const queue = yield* TaskStore
        let busy = 3
        const flaky: TaskStoreShape = {
          ...queue,
          // Another process holds the task's lock the first times it is asked for (a worker's walk).
          claim: (taskId, request) =>
            busy-- > 0 ? Effect.succeed(Option.none()) : queue.claim(taskId, request)
        }
        const tasks = yield* engine.pipe(Effect.provideService(TaskStore, flaky))
        const created = yield* tasks.hold(call)
        assert.strictEqual(created.status, "working")
        assert.strictEqual((yield* queue.peek(handleOf(created).taskId)).state, "running")

        const never: TaskStoreShape = { ...queue, claim: () => Effect.succeed(Option.none()) }
        const stuck = yield* engine.pipe(Effect.provideService(TaskStore, never))
        const refused = yield* Effect.flip(stuck.hold({ ...call, tool: "stuck" }))
        assert.strictEqual(refused._tag, "StorageError")
        const page = yield* queue.list({ limit: 10 })
        const left = page.tasks.find((task) => task.state !== "running")
        assert.strictEqual(left?.state, "cancelled", "never left queued for nobody")
      }).pipe(Effect.provide(store))
  )

  it.scopedLive(
    "settle returns once the outcome is written, after storage errors, and fails when it never is",
    () =>
      Effect.gen(function* () {
        const queue = yield* TaskStore
        let failures = 2
        const flaky: TaskStoreShape = {
          ...queue,
          complete: (taskId, lease, result, receipt) =>
            failures-- > 0
              ? Effect.fail(new StorageError({ operation: "rename", path: "x", reason: "EIO" }))
              : queue.complete(taskId, lease, result, receipt)
        }
        const tasks = yield* engine.pipe(Effect.provideService(TaskStore, flaky))
        const held = yield* tasks.hold(call)
        yield* tasks.settle(held.taskId, { _tag: "complete", result: okAnswer({ ok: 1 }) })
        assert.strictEqual((yield* queue.peek(handleOf(held).taskId)).state, "complete")

        const broken: TaskStoreShape = {
          ...queue,
          complete: () => Effect.fail(new StorageError({ operation: "rename", path: "x", reason: "EIO" }))
        }
        const failing = yield* engine.pipe(Effect.provideService(TaskStore, broken))
        const lost = yield* failing.hold(call)
        const refused = yield* Effect.flip(
          failing.settle(lost.taskId, { _tag: "complete", result: okAnswer({}) })
        )
        assert.strictEqual(refused._tag, "StorageError", "not acknowledged: the SDK's storeTaskResult fails")
      }).pipe(Effect.provide(store))
  )

  it.scopedLive("a cancel that meets a task finished since its look is refused as finished", () =>
    Effect.gen(function* () {
      const queue = yield* TaskStore
      const receipt = yield* queue.submit({ clientRequestId: ClientRequestId.make("racing"), payload: {} })
      const racing: TaskStoreShape = {
        ...queue,
        // The task finished between the look and the cancel: the store reports it as it is.
        cancel: (taskId) =>
          Effect.succeed({ task_id: taskId, cancelled: false, cancel_requested: false, state: "complete" })
      }
      const tasks = yield* engine.pipe(Effect.provideService(TaskStore, racing))
      const handle = formatHandle({ taskId: receipt.task_id, payloadSha256: receipt.payload_sha256 })
      const refused = yield* Effect.flip(tasks.cancel(handle))
      assert.strictEqual(refused._tag, "TaskFinished")
    }).pipe(Effect.provide(store))
  )

  it.scopedLive("changes tells of each change of the tasks it knows, and of no other", () =>
    Effect.gen(function* () {
      const queue = yield* TaskStore
      const tasks = yield* engine
      const heard = yield* Effect.fork(Stream.runCollect(Stream.take(tasks.changes, 1)))
      yield* Effect.sleep(Duration.millis(20))
      // A task nobody asked this engine about changes: not told.
      yield* queue.submit({ clientRequestId: ClientRequestId.make("unseen"), payload: { n: 2 } })
      const created = yield* tasks.hold(call)
      yield* tasks.settle(created.taskId, { _tag: "complete", result: okAnswer({}) })
      const [first] = yield* Fiber.join(heard)
      assert.strictEqual(first?.taskId, created.taskId)
    }).pipe(Effect.provide(store))
  )

  it.scopedLive("tasks/list names every task of the queue by its handle, newest first", () =>
    Effect.gen(function* () {
      const queue = yield* TaskStore
      const tasks = yield* engine
      const receipt = yield* queue.submit({
        clientRequestId: ClientRequestId.make("listed"),
        payload: { n: 3 }
      })
      yield* Effect.sleep(Duration.millis(5))
      const created = yield* tasks.hold(call)
      const page = yield* tasks.list(undefined)
      assert.deepStrictEqual(
        page.tasks.map((task) => [task.taskId, task.statusMessage]),
        [
          [created.taskId, created.statusMessage],
          [
            formatHandle({ taskId: receipt.task_id, payloadSha256: receipt.payload_sha256 }),
            "queued: waiting for a worker"
          ]
        ]
      )
      assert.isUndefined(page.nextCursor)
    }).pipe(Effect.provide(store))
  )
})
