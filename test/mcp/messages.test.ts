/**
 * What a caller is told about a wrong argument, through the real pipeline of both servers:
 * `InvalidArguments`, the field, and what the field must be, in words. Never the field's
 * description in place of a type, never only the first allowed literal, never the value given.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Predicate } from "effect"
import { auditLogMemoryLayer } from "../../src/mcp/auditLayer.js"
import { memoryTools } from "../../src/mcp/memory/tools.js"
import { toolMap } from "../../src/mcp/pipeline.js"
import { describeTool } from "../../src/mcp/server.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"
import { Host } from "../../src/services/Host.js"
import { MemoryStore } from "../../src/services/MemoryStore.js"
import type { TaskStore } from "../../src/services/TaskStore.js"
import type { Tool } from "../../src/mcp/Tool.js"
import { callAudited, textOf } from "./inProcess.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

type Stores = TaskStore | MemoryStore
const toolsOf: Record<"tasks" | "memory", ReadonlyArray<Tool<Stores>>> = {
  tasks: taskTools,
  memory: memoryTools
}
const tasks = toolMap(toolsOf.tasks)
const memory = toolMap(toolsOf.memory)

const unreachable = Effect.dieMessage("a handler ran for invalid arguments")
const stores = Layer.mergeAll(
  auditLogMemoryLayer,
  memoryTaskStoreLayer({ maxPayloadBytes: 64 }).pipe(Layer.provide(Host.layerTest({}))),
  Layer.succeed(
    MemoryStore,
    MemoryStore.of({ search: () => unreachable, read: () => unreachable, importFile: () => unreachable })
  )
)

const hex = "a".repeat(64)
const receipt = { task_id: hex, payload_sha256: hex }
const States = "must be one of queued, running, complete, failed, cancelled"

/** Calls and the whole text of their answer. */
const cases: ReadonlyArray<readonly ["tasks" | "memory", string, Record<string, unknown>, string]> = [
  ["tasks", "read", { ...receipt, wait_seconds: "2" }, "wait_seconds: must be a number from 0 to 60"],
  ["tasks", "read", { ...receipt, wait_seconds: -1 }, "wait_seconds: must be a number from 0 to 60"],
  ["tasks", "read", { ...receipt, wait_seconds: 61 }, "wait_seconds: must be a number from 0 to 60"],
  ["tasks", "read", { ...receipt, wait_seconds: null }, "wait_seconds: must be a number from 0 to 60"],
  ["tasks", "read", { ...receipt, task_id: 5 }, "task_id: must be a string"],
  ["tasks", "read", { ...receipt, task_id: "A".repeat(64) }, "task_id: must be 64 lowercase hex characters"],
  ["tasks", "cancel", { ...receipt, payload_sha256: [] }, "payload_sha256: must be a string"],
  ["tasks", "list", { state: "bogus" }, `state: ${States}`],
  ["tasks", "list", { state: 3 }, `state: ${States}`],
  ["tasks", "list", { state: "cancelled " }, `state: ${States}`],
  ["tasks", "list", { limit: "2" }, "limit: must be an integer from 1 to 500"],
  ["tasks", "list", { limit: -1 }, "limit: must be an integer from 1 to 500"],
  ["tasks", "list", { limit: 0 }, "limit: must be an integer from 1 to 500"],
  ["tasks", "list", { limit: 501 }, "limit: must be an integer from 1 to 500"],
  ["tasks", "list", { limit: 1.5 }, "limit: must be an integer from 1 to 500"],
  ["tasks", "list", { cursor: "not-a-cursor" }, "cursor: must be a next_cursor returned by list"],
  ["tasks", "list", { cursor: 7 }, "cursor: must be a string"],
  ["tasks", "submit", { client_request_id: 5, payload: {} }, "client_request_id: must be a string"],
  ["tasks", "submit", { client_request_id: "", payload: {} }, "client_request_id: must not be empty"],
  [
    "tasks",
    "submit",
    { client_request_id: "x".repeat(201), payload: {} },
    "client_request_id: must be at most 200 characters"
  ],
  ["tasks", "submit", { client_request_id: "r", payload: [1] }, "payload: must be a JSON object"],
  ["tasks", "submit", { client_request_id: "r", payload: "{}" }, "payload: must be a JSON object"],
  ["memory", "search", { query: "x", limit: -1 }, "limit: must be an integer from 1 to 20"],
  ["memory", "search", { query: "x", limit: "2" }, "limit: must be an integer from 1 to 20"],
  ["memory", "search", { query: "x", limit: 21 }, "limit: must be an integer from 1 to 20"],
  ["memory", "search", { query: "   " }, "query: must contain at least one term"],
  ["memory", "search", { query: 1 }, "query: must be a string"],
  ["memory", "search", { query: "secret ".repeat(143) }, "query: must be at most 1,000 characters"],
  [
    "memory",
    "search",
    { query: Array.from({ length: 33 }, (_, n) => `secret${n}`).join(" ") },
    "query: must have at most 32 distinct terms"
  ],
  [
    "memory",
    "search",
    { query: `ok ${"secret".repeat(34)}` },
    "query: must have no term longer than 200 characters"
  ],
  ["memory", "read", { id: "" }, "id: must not be empty"],
  ["memory", "read", { id: false }, "id: must be a string"]
]

const descriptionOf = (server: "tasks" | "memory", tool: string, field: string): string => {
  const found = toolsOf[server].find((t) => t.name === tool)
  const properties = found === undefined ? undefined : describeTool(found).inputSchema["properties"]
  const property = Predicate.isRecord(properties) ? properties[field] : undefined
  const description = Predicate.isRecord(property) ? property["description"] : undefined
  return typeof description === "string" ? description : ""
}

describe("messages for wrong arguments", () => {
  it.effect("say what the field must be, as InvalidArguments, audited as invalid", () =>
    Effect.gen(function* () {
      for (const [server, tool, args, expected] of cases) {
        const { result, entry } = yield* callAudited(server === "tasks" ? tasks : memory, tool, args)
        const where = `${server}.${tool} ${JSON.stringify(args)}`
        assert.isTrue(result.isError, where)
        assert.strictEqual(textOf(result), `InvalidArguments: ${expected}`, where)
        assert.strictEqual(entry.status, "invalid", where)
        assert.deepStrictEqual(entry.error, { tag: "InvalidArguments", message: expected }, where)
        const field = expected.slice(0, expected.indexOf(":"))
        const description = descriptionOf(server, tool, field)
        assert.isAbove(description.length, 0, `${field} is described`)
        assert.notInclude(textOf(result), description, `${where}: the description is not the message`)
        assert.notInclude(textOf(result), "Expected", where)
      }
    }).pipe(Effect.provide(stores))
  )

  it.effect("never quote the value they refuse", () =>
    Effect.gen(function* () {
      const secret = "s3cr3t-value-9f2c"
      const calls: ReadonlyArray<readonly ["tasks" | "memory", string, Record<string, unknown>]> = [
        ["tasks", "read", { ...receipt, wait_seconds: secret }],
        ["tasks", "read", { ...receipt, task_id: secret }],
        ["tasks", "list", { state: secret }],
        ["tasks", "list", { limit: secret }],
        ["tasks", "list", { cursor: secret }],
        ["tasks", "submit", { client_request_id: `${secret}\u0000`, payload: {} }],
        ["tasks", "submit", { client_request_id: "r", payload: secret }],
        ["memory", "search", { query: "x", limit: secret }],
        ["memory", "search", { query: `${secret} `.repeat(60) }],
        ["memory", "search", { query: Array.from({ length: 40 }, (_, n) => `${secret}${n}`).join(" ") }],
        ["memory", "search", { query: secret.repeat(20) }],
        ["memory", "read", { id: `${secret}\u0007` }]
      ]
      for (const [server, tool, args] of calls) {
        const { result } = yield* callAudited(server === "tasks" ? tasks : memory, tool, args)
        assert.match(textOf(result), /^InvalidArguments: \w+: must /, `${server}.${tool}`)
        assert.notInclude(textOf(result), secret, `${server}.${tool}`)
      }
    }).pipe(Effect.provide(stores))
  )

  it.effect("a string holding a number is refused, not coerced", () =>
    Effect.gen(function* () {
      for (const [tool, args] of [
        ["list", { limit: "10" }],
        ["read", { ...receipt, wait_seconds: "0" }]
      ] as const) {
        const { result } = yield* callAudited(tasks, tool, args)
        assert.match(textOf(result), /^InvalidArguments: (limit|wait_seconds): must be an? (integer|number) /)
      }
    }).pipe(Effect.provide(stores))
  )

  it.effect("a payload over the store's limit is InvalidArguments too, not the store's InvalidInput", () =>
    Effect.gen(function* () {
      const { result, entry } = yield* callAudited(tasks, "submit", {
        client_request_id: "big",
        payload: { text: "x".repeat(100) }
      })
      assert.match(textOf(result), /^InvalidArguments: payload: is \d+ bytes; the limit is 64 bytes$/)
      assert.strictEqual(entry.status, "invalid")
      assert.strictEqual(entry.error?.tag, "InvalidArguments")
    }).pipe(Effect.provide(stores))
  )
})
