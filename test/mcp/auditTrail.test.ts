/** Every call leaves a trace: a cancelled call is audited, and an un-auditable call says so. */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Ref, TestClock } from "effect"
import { StorageError } from "../../src/domain/errors.js"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogMemoryLayer } from "../../src/mcp/auditLayer.js"
import { callTool, inProcessContext, toolMap } from "../../src/mcp/pipeline.js"
import { auditEntries, exampleTools, textOf } from "./inProcess.js"

const brokenAudit = Layer.succeed(AuditLog, {
  append: () =>
    Effect.fail(new StorageError({ operation: "append", path: "audit", reason: "ENOSPC: no space left" })),
  list: () => Effect.succeed([]),
  prune: () => Effect.succeed({ removed: 0, kept: 0 })
})

describe("the audit trail", () => {
  it.effect("a call the client cancels is audited as Cancelled", () =>
    Effect.gen(function* () {
      const tools = toolMap(exampleTools(yield* Ref.make<ReadonlyArray<string>>([])))
      const call = yield* Effect.fork(callTool(tools, "slow", {}, inProcessContext("test")))
      yield* TestClock.adjust("1 millis")
      yield* Fiber.interrupt(call)
      const entries = yield* auditEntries
      assert.strictEqual(entries.length, 1)
      assert.strictEqual(entries[0]?.tool, "slow")
      assert.deepStrictEqual(entries[0]?.error, {
        tag: "Cancelled",
        message: "the client cancelled the call"
      })
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("a call that cannot be audited answers AuditFailed instead of its result", () =>
    Effect.gen(function* () {
      const tools = toolMap(exampleTools(yield* Ref.make<ReadonlyArray<string>>([])))
      const result = yield* callTool(tools, "look", { text: "1" }, inProcessContext("test"))
      assert.isTrue(result.isError)
      assert.match(textOf(result), /^AuditFailed: the call ran, but could not be audited: .*ENOSPC/)
    }).pipe(Effect.provide(brokenAudit))
  )
})
