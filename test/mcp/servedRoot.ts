/**
 * Both MCP servers over a fresh root, in-process, for the redaction properties: a file queue, a
 * memory store and a file audit log, and the bins' logger writing to lines a test can read. What
 * left (answers, audit files and entries, log lines) is gathered for a test to search.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert } from "@effect/vitest"
import type { Console } from "effect"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { redactedStderrLogger } from "../../src/cli/redactedLogger.js"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogLayer } from "../../src/mcp/auditLayer.js"
import { memoryTools } from "../../src/mcp/memory/tools.js"
import type { ToolResult } from "../../src/mcp/pipeline.js"
import { callTool, inProcessContext, toolMap } from "../../src/mcp/pipeline.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"
import { Host } from "../../src/services/Host.js"
import type { MemoryStore } from "../../src/services/MemoryStore.js"
import type { TaskStore } from "../../src/services/TaskStore.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"
import { mcpTasksLayer } from "../../src/mcp/taskEngine.js"
import { memoryStoreLayer } from "../../src/store/memoryLayer.js"
import { tempDir } from "../support/stores.js"
import { leaks } from "./plantedSecrets.js"

/** Every byte of every file under `dir`, as text. */
export const everyByteUnder = (dir: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const texts: Array<string> = []
    for (const name of yield* fs.readDirectory(dir, { recursive: true })) {
      const file = path.join(dir, name)
      if ((yield* fs.stat(file)).type === "File") texts.push(yield* fs.readFileString(file))
    }
    return texts.join("\n")
  })

/** The bins' logger at every level, writing to lines the test can read. */
const capturedLogs = Effect.gen(function* () {
  const lines: Array<string> = []
  const console = yield* Effect.console
  const write = (...args: ReadonlyArray<unknown>) => {
    lines.push(args.map(String).join(" "))
  }
  const capturing: Console.Console = {
    ...console,
    unsafe: {
      ...console.unsafe,
      error: write,
      log: write,
      warn: write,
      info: write,
      debug: write,
      trace: write
    }
  }
  const layer = Layer.mergeAll(
    Logger.replace(Logger.defaultLogger, redactedStderrLogger),
    Logger.minimumLogLevel(LogLevel.All)
  )
  return { lines, layer, console: capturing }
})

export const MemoryRows = [
  { id: "mem-1", text: "Lumen deploys need one approval.", source: "test" },
  { id: "mem-2", text: "Deploy approval rules for Lumen: two approvals.", source: "test" }
]

/** Both servers' tools over a fresh root, audited to `<root>/audit`, logging to `logs`. */
export const servedRoot = Effect.gen(function* () {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const root = yield* tempDir
  const memoryFile = path.join(yield* tempDir, "memory.jsonl")
  yield* fs.writeFileString(memoryFile, MemoryRows.map((row) => `${JSON.stringify(row)}\n`).join(""))
  const auditDir = path.join(root, "audit")
  const stores = Layer.mergeAll(
    auditLogLayer(auditDir),
    mcpTasksLayer.pipe(Layer.provideMerge(fileTaskStoreLayer({ root }))),
    memoryStoreLayer(memoryFile)
  ).pipe(Layer.provide(Host.layerTest({})), Layer.provide(nodeContextLayer))
  const logs = yield* capturedLogs
  const answers: Array<string> = []
  const call = (
    server: "tasks" | "memory",
    tool: string,
    args: unknown
  ): Effect.Effect<ToolResult, never, TaskStore | MemoryStore | AuditLog> => {
    const result: Effect.Effect<ToolResult, never, TaskStore | MemoryStore | AuditLog> =
      server === "tasks"
        ? callTool(toolMap(taskTools), tool, args, inProcessContext("relaykeep-tasks"))
        : callTool(toolMap(memoryTools), tool, args, inProcessContext("relaykeep-memory"))
    return Effect.tap(result, (answer) => Effect.sync(() => answers.push(JSON.stringify(answer))))
  }
  /** Everything that left: answers, audit files, listed entries, log lines. */
  const outputs = Effect.gen(function* () {
    const listed = yield* Effect.flatMap(AuditLog, (audit) => audit.list({}))
    return {
      answers: answers.join("\n"),
      audit: `${yield* everyByteUnder(auditDir)}\n${JSON.stringify(listed)}`,
      logs: logs.lines.join("\n"),
      entries: listed
    }
  })
  const layer = Layer.mergeAll(stores, logs.layer)
  return { root, memoryFile, call, outputs, layer, console: logs.console }
})

export const assertNoLeak = (
  outputs: { readonly answers: string; readonly audit: string; readonly logs: string },
  secrets: ReadonlyArray<string>
) => {
  assert.deepStrictEqual(leaks(outputs.answers, secrets), [], "a secret in a tool answer")
  assert.deepStrictEqual(leaks(outputs.audit, secrets), [], "a secret in the audit log")
  assert.deepStrictEqual(leaks(outputs.logs, secrets), [], "a secret in the log")
}
