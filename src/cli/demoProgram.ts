/**
 * What `relaykeep demo` runs: the whole hand-off on a throwaway root, with no model, login or
 * key. It spawns the real `relaykeep-tasks` server through the MCP SDK's stdio client.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { Console, Context, Effect, Layer, Schema } from "effect"
import { fileURLToPath } from "node:url"
import { Receipt, TaskView } from "../domain/Task.js"
import { runPass } from "../worker/pass.js"
import { fileTaskStoreLayer } from "../store/file/layer.js"
import { echoProviderLayer } from "../providers/layer.js"

class DemoRoot extends Context.Tag("relaykeep/DemoRoot")<DemoRoot, string>() {}

export class DemoStepFailed extends Schema.TaggedError<DemoStepFailed>()("DemoStepFailed", {
  step: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `step ${this.step}: ${this.reason}`
  }
}

const TasksServerBin = fileURLToPath(new URL("../bin/relaykeep-tasks.js", import.meta.url))

/** A session with the real server: connected when acquired, closed when the scope ends. */
const session = (root: string, step: number) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        const client = new Client({ name: "relaykeep-demo", version: "1" })
        await client.connect(
          new StdioClientTransport({
            command: process.execPath,
            args: [TasksServerBin, "--root", root],
            stderr: "inherit"
          })
        )
        return client
      },
      catch: (error) =>
        new DemoStepFailed({ step, reason: `could not start relaykeep-tasks: ${String(error)}` })
    }),
    (client) => Effect.promise(() => client.close())
  )

/** Call a tool and decode its structured result; an error result fails the step with its text. */
const call = <A, I>(
  client: Client,
  step: number,
  name: string,
  args: Record<string, unknown>,
  schema: Schema.Schema<A, I>
) =>
  Effect.gen(function* () {
    const result = yield* Effect.tryPromise({
      try: () => client.callTool({ name, arguments: args }),
      catch: (error) => new DemoStepFailed({ step, reason: `${name} failed: ${String(error)}` })
    })
    if (result.isError) {
      return yield* new DemoStepFailed({ step, reason: `${name}: ${JSON.stringify(result.content)}` })
    }
    return yield* Schema.decodeUnknown(schema)(result.structuredContent).pipe(
      Effect.mapError(
        (error) => new DemoStepFailed({ step, reason: `${name} answered unexpectedly: ${error.message}` })
      )
    )
  })

/** The error text of a call that must fail. */
const callError = (client: Client, step: number, name: string, args: Record<string, unknown>) =>
  Effect.gen(function* () {
    const result = yield* Effect.promise(() => client.callTool({ name, arguments: args }))
    if (!result.isError) return yield* new DemoStepFailed({ step, reason: `${name} was expected to fail` })
    return JSON.stringify(result.content)
  })

const check = (step: number, ok: boolean, reason: string) =>
  ok ? Effect.void : Effect.fail(new DemoStepFailed({ step, reason }))

export const demoProgram = Effect.gen(function* () {
  const root = yield* DemoRoot
  const payload = { message: "hello from the demo" }
  const request = { client_request_id: "demo-1", payload }

  const receipt = yield* Effect.scoped(
    Effect.gen(function* () {
      const client = yield* session(root, 1)
      const first = yield* call(client, 1, "submit", request, Receipt)
      const second = yield* call(client, 1, "submit", request, Receipt)
      yield* check(1, JSON.stringify(first) === JSON.stringify(second), "the two receipts differ")
      const view = yield* call(
        client,
        1,
        "read",
        { task_id: first.task_id, payload_sha256: first.payload_sha256 },
        TaskView
      )
      yield* check(1, view.state === "queued", `state is ${view.state}, expected queued`)
      return first
    })
  )
  yield* Console.log(
    "✓ 1. submitted twice through relaykeep-tasks: the same receipt, and the task stays queued"
  )

  const pass = yield* runPass({ workerId: "demo-worker", leaseMillis: 60_000 })
  yield* check(
    2,
    pass.dispatched.length === 1 && pass.dispatched[0] === receipt.task_id,
    "the pass did not run the task"
  )
  yield* Console.log("✓ 2. disconnected; one worker pass ran the task through the echo provider")

  yield* Effect.scoped(
    Effect.gen(function* () {
      const client = yield* session(root, 3)
      const args = { task_id: receipt.task_id, payload_sha256: receipt.payload_sha256 }
      const a = yield* call(client, 3, "read", args, TaskView)
      const b = yield* call(client, 3, "read", args, TaskView)
      yield* check(3, a.state === "complete", `state is ${a.state}, expected complete`)
      yield* check(3, JSON.stringify(a) === JSON.stringify(b), "two reads gave different answers")
      yield* check(
        3,
        JSON.stringify(a.result) === JSON.stringify({ echo: payload, provider: "fake-echo" }),
        "unexpected result"
      )
      const conflict = yield* callError(client, 3, "submit", {
        client_request_id: "demo-1",
        payload: { message: "other" }
      })
      yield* check(3, conflict.includes("ConflictError"), `expected ConflictError, got ${conflict}`)
    })
  )
  yield* Console.log(
    "✓ 3. a new MCP session read the result twice, the same; a different payload under the same id: ConflictError"
  )

  const again = yield* runPass({ workerId: "demo-worker", leaseMillis: 60_000 })
  yield* check(4, again.dispatched.length === 0, "the second pass dispatched something")
  yield* Console.log("✓ 4. a second worker pass dispatched nothing")
  yield* Console.log("demo passed; the temporary root is removed")
})

/** A temporary root, removed when the demo ends however it ends, with a store on it. */
export const DemoLive = Layer.unwrapScoped(
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const root = yield* fs.makeTempDirectoryScoped({ prefix: "relaykeep-demo-" })
    return Layer.mergeAll(Layer.succeed(DemoRoot, root), fileTaskStoreLayer({ root }), echoProviderLayer)
  })
)
