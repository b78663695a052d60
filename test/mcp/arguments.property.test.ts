/**
 * Random and malformed arguments to every tool of both servers. Whatever arrives, the call
 * answers (it never fails or dies); a malformed call is `InvalidArguments` naming the field (and
 * what it must be) or the unexpected key; and every call leaves exactly one audit entry.
 */
import { memoryStoreLayer } from "../../src/store/memoryLayer.js"
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, FastCheck as fc, Layer } from "effect"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogMemoryLayer } from "../../src/mcp/auditLayer.js"
import { memoryTools } from "../../src/mcp/memory/tools.js"
import type { ToolResult } from "../../src/mcp/pipeline.js"
import { callTool, inProcessContext, toolMap } from "../../src/mcp/pipeline.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"
import type { Tool } from "../../src/mcp/Tool.js"
import { Host } from "../../src/services/Host.js"
import { MemoryStore } from "../../src/services/MemoryStore.js"
import type { TaskStore } from "../../src/services/TaskStore.js"
import { tempDir } from "../support/stores.js"
import type { Call, Field, Server } from "./toolArguments.js"
import { anyCall, tools } from "./toolArguments.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

const servers = { tasks: toolMap(taskTools), memory: toolMap(memoryTools) }
const serverName = (server: Server) => `relaykeep-${server}`

const MemoryLines = [
  { id: "mem-1", text: "Lumen deploys need one approval.", source: "test" },
  { id: "mem-2", text: "Deploy approval rules for Lumen: two approvals.", source: "test", tags: ["deploy"] }
]

const run = (call: Call): Effect.Effect<ToolResult, never, TaskStore | MemoryStore | AuditLog> =>
  call.server === "tasks"
    ? callTool(servers.tasks, call.tool, call.args, inProcessContext(serverName("tasks")))
    : callTool(servers.memory, call.tool, call.args, inProcessContext(serverName("memory")))

const isPlainObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** What the answer to one call must look like. */
const checkAnswer = (call: Call, text: string, isError: boolean) => {
  const invalid = text.startsWith("InvalidArguments: ")
  const where = `${call.server}.${call.tool} (${call.kind})`
  const fields = Object.keys(tools[call.server][call.tool] ?? {})
  switch (call.kind) {
    case "valid":
      assert.isFalse(invalid, `${where}: well-formed arguments were rejected: ${text}`)
      break
    case "wrong":
      // Says what the field must be, in words: never Schema's "Expected <description>".
      assert.match(text, new RegExp(`^InvalidArguments: ${call.field}: (must|is) `), where)
      assert.notInclude(text, "Expected", where)
      break
    case "missing":
      assert.strictEqual(text, `InvalidArguments: ${call.field}: is missing`, where)
      break
    case "extra":
      assert.isTrue(text.startsWith(`InvalidArguments: ${call.key}: is unexpected`), `${where}: ${text}`)
      break
    case "anything": {
      const foreignKey =
        isPlainObject(call.args) && Object.keys(call.args).some((key) => !fields.includes(key))
      const notAnObject = call.args != null && !isPlainObject(call.args)
      if (foreignKey || notAnObject) assert.isTrue(invalid, `${where}: ${text}`)
      // Arguments that are not an object at all are covered by an example test below.
      if (invalid && !notAnObject) {
        const keys = isPlainObject(call.args) ? Object.keys(call.args) : []
        const named =
          fields.some((field) => text.includes(field)) ||
          keys.some((key) => text.startsWith(`InvalidArguments: ${key}: is unexpected`))
        assert.isTrue(named, `${where}: names no field: ${text}`)
      }
    }
  }
  if (invalid) assert.isTrue(isError, where)
  if (!isError) assert.isTrue(isPlainObject(JSON.parse(text)), where)
}

describe("malformed arguments to every tool", () => {
  it("the generators cover exactly the advertised fields of every tool", () => {
    const advertised = (list: ReadonlyArray<Tool<unknown>>) =>
      Object.fromEntries(
        list.map((tool) => {
          const schema = tool.inputJsonSchema
          const properties =
            "properties" in schema && isPlainObject(schema.properties) ? schema.properties : {}
          const required = "required" in schema && Array.isArray(schema.required) ? schema.required : []
          return [tool.name, { fields: Object.keys(properties).sort(), required: [...required].sort() }]
        })
      )
    const ours = (table: Readonly<Record<string, Readonly<Record<string, Field>>>>) =>
      Object.fromEntries(
        Object.entries(table).map(([name, fields]) => [
          name,
          {
            fields: Object.keys(fields).sort(),
            required: Object.keys(fields)
              .filter((field) => fields[field]?.required)
              .sort()
          }
        ])
      )
    assert.deepStrictEqual(ours(tools.tasks), advertised(taskTools))
    assert.deepStrictEqual(ours(tools.memory), advertised(memoryTools))
  })

  // Over the wire the SDK only lets objects through; in-process anything goes, and the answer
  // should still say what is wrong: that arguments are an object, or which fields the tool takes.
  const unreachable = Effect.dieMessage("a handler ran for invalid arguments")
  const unreachableStores = Layer.mergeAll(
    memoryTaskStoreLayer().pipe(Layer.provide(Host.layerTest({}))),
    Layer.succeed(
      MemoryStore,
      MemoryStore.of({ search: () => unreachable, read: () => unreachable, importFile: () => unreachable })
    )
  )
  const notObjects: ReadonlyArray<unknown> = [[], [1], 5, "text", true]
  const everyTool = [
    ...taskTools.map((tool) => ["tasks", tool.name] as const),
    ...memoryTools.map((tool) => ["memory", tool.name] as const)
  ]
  for (const [server, tool] of everyTool) {
    it.effect(`${server}.${tool}: arguments that are not an object are refused plainly`, () =>
      Effect.gen(function* () {
        const fields = Object.keys(tools[server][tool] ?? {})
        for (const args of notObjects) {
          const result = yield* run({ server, tool, args, kind: "anything" })
          const text = result.content[0]?.text ?? ""
          assert.match(text, /^InvalidArguments: /)
          assert.isTrue(
            text === "InvalidArguments: arguments must be an object" ||
              fields.some((field) => text.includes(field)),
            `${JSON.stringify(args)} -> ${text}`
          )
        }
      }).pipe(Effect.provide(Layer.mergeAll(auditLogMemoryLayer, unreachableStores)))
    )
  }

  it.scoped.prop(
    "every call answers, bad ones name the field, and each is audited once",
    { calls: fc.array(anyCall, { minLength: 1, maxLength: 8 }) },
    ({ calls }) =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const store = path.join(yield* tempDir, "memory.jsonl")
        yield* fs.writeFileString(store, MemoryLines.map((line) => `${JSON.stringify(line)}\n`).join(""))
        const layer = Layer.mergeAll(
          auditLogMemoryLayer,
          memoryTaskStoreLayer(),
          memoryStoreLayer(store)
        ).pipe(Layer.provide(Host.layerTest({})), Layer.provide(nodeContextLayer))
        yield* Effect.gen(function* () {
          for (const call of calls) {
            const exit = yield* Effect.exit(run(call))
            assert.isTrue(Exit.isSuccess(exit), `${call.server}.${call.tool} failed or died`)
            if (Exit.isSuccess(exit)) {
              const result = exit.value
              assert.strictEqual(result.content.length, 1)
              checkAnswer(call, result.content[0]?.text ?? "", result.isError === true)
            }
          }
          const entries = yield* Effect.flatMap(AuditLog, (audit) => audit.list({}))
          assert.deepStrictEqual(
            entries.map((entry) => [entry.server, entry.tool]),
            calls.map((call) => [serverName(call.server), call.tool])
          )
          for (const entry of entries) {
            assert.isAtLeast(entry.duration_ms, 0)
            assert.strictEqual(entry.status === "invalid", entry.error?.tag === "InvalidArguments")
          }
        }).pipe(Effect.provide(layer))
      }).pipe(Effect.provide(nodeContextLayer)),
    { fastCheck: { numRuns: 100, seed: 20250601 } }
  )
})
