// A server built on RelayKeep's toolkit whose long tools run as MCP tasks, kept in a RelayKeep
// queue so that they outlive the server process:
//
//   node examples/long-task-server.mjs --root ./long-task-data
//
// `count_to` counts to n, one step every interval_ms. A client with MCP tasks calls it with
// `task: {}` and gets a task at once; tasks/get polls it and tasks/result answers with its result,
// from this server or, after a restart, from a new one. `count_or_fail` runs only as a task and
// fails at the step it is told to. A task still running when its server stops is reported failed
// (interrupted), never forgotten. Every call and every tasks/* request is audited under
// <root>/audit. stdout carries JSON-RPC only; logs go to stderr.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Logger, Schema } from "effect"
import {
  auditLogLayer,
  defineTool,
  fileTaskStoreLayer,
  Host,
  mcpTasksLayer,
  nodeContextLayer,
  serveStdio
} from "relaykeep"

const option = (name) => process.argv.flatMap((arg, i) => (process.argv[i - 1] === name ? [arg] : []))
const root = option("--root")[0] ?? "long-task-data"

const Steps = Schema.Int.pipe(Schema.between(1, 600)).annotations({ description: "How far to count, 1-600" })
const Interval = Schema.Int.pipe(Schema.between(10, 10_000)).annotations({
  description: "Milliseconds between steps, 10-10000 (default 1000)"
})
const Counted = Schema.Struct({ counted: Schema.Int.annotations({ description: "How far it counted" }) })

/** Count to n, reporting each step as progress. */
const count = (n, intervalMillis, context, failAt) =>
  Effect.gen(function* () {
    for (let step = 1; step <= n; step++) {
      yield* Effect.sleep(intervalMillis)
      if (step === failAt)
        return yield* Effect.fail({ _tag: "CountFailed", message: `gave up at step ${step}` })
      yield* context.progress(step, n, `counted to ${step}`)
    }
    return { counted: n }
  })

const tools = [
  defineTool({
    name: "count_to",
    description: "Count from 1 to n, one step every interval_ms. Long: call it as a task.",
    input: Schema.Struct({ n: Steps, interval_ms: Schema.optional(Interval) }),
    output: Counted,
    tier: "read_only",
    taskSupport: "optional",
    handler: ({ n, interval_ms }, context) => count(n, interval_ms ?? 1000, context, undefined)
  }),
  defineTool({
    name: "count_or_fail",
    description: "Count from 1 to n, failing at step fail_at. Runs only as a task.",
    input: Schema.Struct({ n: Steps, fail_at: Steps, interval_ms: Schema.optional(Interval) }),
    output: Counted,
    tier: "read_only",
    taskSupport: "required",
    handler: ({ n, fail_at, interval_ms }, context) => count(n, interval_ms ?? 1000, context, fail_at)
  })
]

const live = Layer.mergeAll(
  auditLogLayer(`${root}/audit`),
  mcpTasksLayer.pipe(Layer.provideMerge(fileTaskStoreLayer({ root }))),
  Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true }))
).pipe(Layer.provide(Host.layer), Layer.provideMerge(nodeContextLayer))

serveStdio({
  name: "long-tasks",
  version: "1.0.0",
  instructions: "count_to counts slowly: call it as a task, then poll tasks/get and read tasks/result.",
  tools
}).pipe(Effect.provide(live), NodeRuntime.runMain)
