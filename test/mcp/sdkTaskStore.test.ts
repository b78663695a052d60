/**
 * The MCP SDK's task-store interface on RelayKeep's durable queue (src/mcp/sdkTaskStore.ts): the
 * SDK's own `McpServer` with a `registerToolTask` tool keeps its tasks in a file queue, so a later
 * engine over the same root (a restarted server) answers for them; a held task whose server ends
 * first is failed as interrupted; lookups the SDK means as "not found" answer null.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { TaskStore as SdkTaskStore } from "@modelcontextprotocol/sdk/experimental/tasks/interfaces.js"
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js"
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js"
import type { Task } from "@modelcontextprotocol/sdk/types.js"
import { CallToolResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, it } from "@effect/vitest"
import { Context, Data, Effect, Exit, Layer, Option, Schema, Scope } from "effect"
import * as z from "zod"
import { parseHandle } from "../../src/domain/mcpTask.js"
import { makeDurableTaskStore } from "../../src/mcp/sdkTaskStore.js"
import { mcpTasksLayer } from "../../src/mcp/taskEngine.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { tempDir } from "../support/stores.js"

const ServerName = "sdk-durable-test"

/** An engine on the file queue under `root`, as one server process builds it. */
const engineLayer = (root: string) =>
  mcpTasksLayer.pipe(
    Layer.provideMerge(fileTaskStoreLayer({ root })),
    Layer.provide(Host.layerTest({})),
    Layer.provide(nodeContextLayer)
  )

/**
 * A "server process": the engine over `root` built in a scope of its own, which `stop` closes
 * (it is closed with the test's scope too, if the test ends first), and the SDK store on it.
 */
const engineAt = (root: string) =>
  Effect.gen(function* () {
    const scope = yield* Effect.acquireRelease(Scope.make(), (scope, exit) => Scope.close(scope, exit))
    const context = yield* Layer.buildWithScope(engineLayer(root), scope)
    const durable = yield* makeDurableTaskStore(ServerName).pipe(Effect.provide(context))
    return {
      scope,
      durable,
      store: Context.get(context, TaskStore),
      stop: Scope.close(scope, Exit.void)
    }
  })

/**
 * The SDK's `McpServer` on `durable` with one task tool, `count`, whose work ends a moment after
 * the task is created, and an SDK client connected to it in memory. Both close with `scope`.
 */
const serve = (durable: SdkTaskStore, scope: Scope.Scope) =>
  Scope.extend(
    Effect.gen(function* () {
      /** What the tool's background work failed with: nothing, if the store took every result. */
      const workFailures: Array<unknown> = []
      const server = new McpServer(
        { name: ServerName, version: "1" },
        {
          capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
          taskStore: durable
        }
      )
      server.experimental.tasks.registerToolTask(
        "count",
        { inputSchema: { n: z.number() }, execution: { taskSupport: "required" } },
        {
          createTask: async ({ n }, extra) => {
            const task = await extra.taskStore.createTask({ ttl: 60_000 })
            setTimeout(() => {
              extra.taskStore
                .storeTaskResult(task.taskId, "completed", {
                  content: [{ type: "text", text: `counted to ${n}` }]
                })
                .catch((error: unknown) => {
                  workFailures.push(error)
                })
            }, 50)
            return { task }
          },
          getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
          getTaskResult: async (_args, extra) =>
            CallToolResultSchema.parse(await extra.taskStore.getTaskResult(extra.taskId))
        }
      )
      const client = new Client({ name: "sdk-durable-client", version: "1" }, { capabilities: { tasks: {} } })
      const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
      yield* Effect.acquireRelease(
        Effect.promise(() => server.connect(serverSide)),
        () => Effect.promise(() => server.close())
      )
      yield* Effect.acquireRelease(
        Effect.promise(() => client.connect(clientSide)),
        () => Effect.promise(() => client.close())
      )
      return { client, workFailures }
    }),
    scope
  )

/** A tool result of text blocks. */
const TextResult = Schema.Struct({
  content: Schema.Array(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })),
  isError: Schema.optional(Schema.Boolean)
})
const textResult = Schema.decodeUnknownSync(TextResult)

/** Call `count` as a task through the SDK client, and gather every message of the stream. */
const callCount = (client: Client, n: number) =>
  Effect.promise(async () => {
    const messages = []
    for await (const message of client.experimental.tasks.callToolStream(
      { name: "count", arguments: { n } },
      CallToolResultSchema,
      { task: { ttl: 60_000 } }
    ))
      messages.push(message)
    return messages
  })

/** Run `count` to its end through a client; the task's id and its final result. */
const countedTask = (client: Client, n: number) =>
  Effect.gen(function* () {
    const messages = yield* callCount(client, n)
    const first = messages[0]
    const last = messages.at(-1)
    if (first?.type !== "taskCreated") throw new Error(`expected taskCreated: ${JSON.stringify(messages)}`)
    if (last?.type !== "result") throw new Error(`expected a result last: ${JSON.stringify(messages)}`)
    return { task: first.task, result: last.result, messages }
  })

const handleOf = (taskId: string) =>
  Option.getOrThrowWith(parseHandle(taskId), () => new Error(`${taskId} is not a RelayKeep handle`))

/** Ask the durable store directly to create a held task, as the SDK's request task store does. */
const holdTask = (durable: SdkTaskStore, ttl: number | null = null) =>
  Effect.promise((): Promise<Task> =>
    durable.createTask({ ttl }, 1, { method: "tools/call", params: { name: "x", arguments: {} } })
  )

/** The same handle with the last hex digit of its hash changed. */
const alteredHandle = (taskId: string) => `${taskId.slice(0, -1)}${taskId.endsWith("0") ? "1" : "0"}`

/** What a promise of the store rejected with, kept as it was. */
class Rejected extends Data.TaggedError("Rejected")<{ readonly error: unknown }> {}

const rejection = <A>(promise: () => Promise<A>) =>
  Effect.map(
    Effect.flip(Effect.tryPromise({ try: promise, catch: (error: unknown) => new Rejected({ error }) })),
    (rejected) => rejected.error
  )

describe("makeDurableTaskStore", () => {
  it.scopedLive(
    "the SDK's McpServer runs a task tool on it: a handle, the stored result, a complete queue task",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const engine = yield* engineAt(root)
        const { client, workFailures } = yield* serve(engine.durable, engine.scope)

        const { task, result, messages } = yield* countedTask(client, 3)
        assert.strictEqual(task.status, "working")
        assert.strictEqual(task.ttl, 60_000)
        assert.deepStrictEqual(textResult(result).content, [{ type: "text", text: "counted to 3" }])
        assert.isUndefined(result.isError)
        assert.isTrue(
          messages.some((message) => message.type === "taskStatus" && message.task.status === "completed"),
          "the stream saw the task completed"
        )
        assert.deepStrictEqual(workFailures, [])

        const handle = handleOf(task.taskId)
        const view = yield* engine.store.read(handle.taskId, handle.payloadSha256)
        assert.strictEqual(view.state, "complete")
        assert.deepStrictEqual(view.result, { content: [{ type: "text", text: "counted to 3" }] })
        const record = yield* engine.store.record(handle.taskId)
        assert.strictEqual(record.payload["provider"], "mcp-tool")
        assert.strictEqual(record.payload["server"], ServerName)
        assert.strictEqual(record.payload["tool"], "count")
        assert.deepStrictEqual(record.payload["arguments"], { n: 3 })
      })
  )

  it.scopedLive("a task outlives its server: a new engine and server on the same root answer for it", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const first = yield* engineAt(root)
      const { client } = yield* serve(first.durable, first.scope)
      const { task, result } = yield* countedTask(client, 5)
      yield* first.stop

      const second = yield* engineAt(root)
      const { client: later } = yield* serve(second.durable, second.scope)
      const got = yield* Effect.promise(() => later.experimental.tasks.getTask(task.taskId))
      assert.strictEqual(got.taskId, task.taskId)
      assert.strictEqual(got.status, "completed")
      const again = yield* Effect.promise(() =>
        later.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)
      )
      assert.deepStrictEqual(textResult(again).content, textResult(result).content)
      assert.deepStrictEqual(textResult(again).content, [{ type: "text", text: "counted to 5" }])
      const listed = yield* Effect.promise(() => later.experimental.tasks.listTasks())
      const entry = listed.tasks.find((each) => each.taskId === task.taskId)
      assert.strictEqual(entry?.status, "completed")
    })
  )

  it.scopedLive("a failed result: the task is failed and its result is the error answer", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { durable } = yield* engineAt(root)
      const task = yield* holdTask(durable, 60_000)
      yield* Effect.promise(() =>
        durable.storeTaskResult(task.taskId, "failed", {
          content: [{ type: "text", text: "boom" }],
          isError: true
        })
      )
      const got = yield* Effect.promise(() => durable.getTask(task.taskId))
      assert.strictEqual(got?.status, "failed")
      assert.strictEqual(got?.statusMessage, "failed: ToolError: boom")
      const result = textResult(yield* Effect.promise(() => durable.getTaskResult(task.taskId)))
      assert.strictEqual(result.isError, true)
      assert.deepStrictEqual(result.content, [{ type: "text", text: "ToolError: boom" }])
    })
  )

  it.scopedLive(
    "a held task whose server ends first is failed as interrupted, as a later engine sees it",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const first = yield* engineAt(root)
        const task = yield* holdTask(first.durable)
        assert.strictEqual(task.status, "working")
        assert.isNull(task.ttl)
        const before = yield* Effect.promise(() => first.durable.getTask(task.taskId))
        assert.strictEqual(before?.status, "working")
        yield* first.stop

        const second = yield* engineAt(root)
        const got = yield* Effect.promise(() => second.durable.getTask(task.taskId))
        assert.strictEqual(got?.status, "failed")
        assert.match(
          got?.statusMessage ?? "",
          /^failed: Interrupted: the server stopped before the tool finished/
        )
        const result = textResult(yield* Effect.promise(() => second.durable.getTaskResult(task.taskId)))
        assert.strictEqual(result.isError, true)
        assert.match(result.content[0]?.text ?? "", /^Interrupted: /)
      })
  )

  it.scopedLive("lookups: an altered or made-up id is not found (null), the real one is", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { durable } = yield* engineAt(root)
      const task = yield* holdTask(durable)
      const altered = alteredHandle(task.taskId)
      assert.notStrictEqual(altered, task.taskId)
      assert.isTrue(Option.isSome(parseHandle(altered)), "still a well-formed handle")
      assert.isNull(yield* Effect.promise(() => durable.getTask(altered)))
      assert.isNull(yield* Effect.promise(() => durable.getTask("nonsense")))
      assert.strictEqual((yield* Effect.promise(() => durable.getTask(task.taskId)))?.status, "working")
    })
  )

  it.scopedLive("a result for a task this engine does not hold is refused as NotHeldHere", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const first = yield* engineAt(root)
      const task = yield* holdTask(first.durable)
      // Another engine on the same root sees the task but does not run it.
      const second = yield* engineAt(root)
      assert.strictEqual(
        (yield* Effect.promise(() => second.durable.getTask(task.taskId)))?.status,
        "working"
      )
      const refused = yield* rejection(() =>
        second.durable.storeTaskResult(task.taskId, "completed", { content: [{ type: "text", text: "x" }] })
      )
      assert.instanceOf(refused, Error)
      if (refused instanceof Error) assert.include(refused.message, "NotHeldHere")
      assert.strictEqual((yield* Effect.promise(() => first.durable.getTask(task.taskId)))?.status, "working")

      // Its own engine takes the result, once; after that it holds the task no more.
      yield* Effect.promise(() =>
        first.durable.storeTaskResult(task.taskId, "completed", { content: [{ type: "text", text: "done" }] })
      )
      assert.strictEqual(
        (yield* Effect.promise(() => first.durable.getTask(task.taskId)))?.status,
        "completed"
      )
      const twice = yield* rejection(() =>
        first.durable.storeTaskResult(task.taskId, "completed", {
          content: [{ type: "text", text: "again" }]
        })
      )
      assert.instanceOf(twice, Error)
      if (twice instanceof Error) assert.include(twice.message, "NotHeldHere")
    })
  )

  // The SDK passes an McpError through with its code, and wraps anything else (as -32603, or
  // -32600 "Failed to cancel task: …"): the store rejects with the McpError itself.
  it.scopedLive("a refused call rejects with the McpError itself (InvalidParams)", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const first = yield* engineAt(root)
      const task = yield* holdTask(first.durable)
      const second = yield* engineAt(root)
      const refused = yield* rejection(() =>
        second.durable.storeTaskResult(task.taskId, "completed", { content: [{ type: "text", text: "x" }] })
      )
      assert.instanceOf(refused, McpError)
      if (refused instanceof McpError) {
        assert.strictEqual(refused.code, ErrorCode.InvalidParams)
        assert.include(refused.message, "NotHeldHere")
      }
    })
  )

  it.scopedLive("updateTaskStatus cancelled ends a held, running task cancelled", () =>
    Effect.gen(function* () {
      const root = yield* tempDir
      const { durable, store } = yield* engineAt(root)
      const task = yield* holdTask(durable)
      assert.strictEqual((yield* Effect.promise(() => durable.getTask(task.taskId)))?.status, "working")
      yield* Effect.promise(() => durable.updateTaskStatus(task.taskId, "cancelled"))
      const got = yield* Effect.promise(() => durable.getTask(task.taskId))
      assert.strictEqual(got?.status, "cancelled")
      const handle = handleOf(task.taskId)
      assert.strictEqual((yield* store.read(handle.taskId, handle.payloadSha256)).state, "cancelled")
      const result = textResult(yield* Effect.promise(() => durable.getTaskResult(task.taskId)))
      assert.strictEqual(result.isError, true)
      assert.match(result.content[0]?.text ?? "", /^Cancelled: /)
    })
  )

  it.scopedLive(
    "updateTaskStatus cancelled from another server process asks the holder to stop, and it does",
    () =>
      Effect.gen(function* () {
        const root = yield* tempDir
        const holder = yield* engineAt(root)
        const task = yield* holdTask(holder.durable)
        const other = yield* engineAt(root)
        yield* Effect.promise(() => other.durable.updateTaskStatus(task.taskId, "cancelled"))
        const got = yield* Effect.promise(() => other.durable.getTask(task.taskId))
        assert.strictEqual(got?.status, "cancelled", "the holder stopped it within the cancel's wait")
      })
  )
})
