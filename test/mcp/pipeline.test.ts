/**
 * The tool pipeline in-process: decode → permit → run with timeout → audit. Every call answers
 * with a result (never a failure or a throw) and appends exactly one audit entry.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Ref, TestClock } from "effect"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogMemoryLayer } from "../../src/mcp/auditLayer.js"
import { ConfirmPolicy } from "../../src/services/ConfirmPolicy.js"
import type { ConfirmRequest } from "../../src/services/ConfirmPolicy.js"
import { callTool, inProcessContext } from "../../src/mcp/pipeline.js"
import { callAudited, DefectSecret, makeExampleTools, textOf, TimeoutMillis } from "./inProcess.js"

describe("pipeline order", () => {
  it.effect("a destructive call with broken arguments is invalid and never reaches the policy", () =>
    Effect.gen(function* () {
      const { tools, ran } = yield* makeExampleTools
      const asked = yield* Ref.make<ReadonlyArray<ConfirmRequest>>([])
      const policy = ConfirmPolicy.of({
        confirm: (request) =>
          Effect.as(
            Ref.update(asked, (all) => [...all, request]),
            { allowed: true, reason: "yes" }
          )
      })
      const broken: ReadonlyArray<readonly [string, unknown]> = [
        ["wipe", {}],
        ["wipe", { target: 7 }],
        ["wipe", { target: "x", extra: true }],
        ["wipe", "not an object"],
        ["wipe", [1]],
        // A tool without arguments still rejects junk ones.
        ["purge", { junk: 1 }],
        ["purge", [{}]],
        ["purge", 0]
      ]
      for (const [name, args] of broken) {
        const { result, entry } = yield* callAudited(tools, name, args).pipe(
          Effect.provideService(ConfirmPolicy, policy)
        )
        assert.isTrue(result.isError, `${name} ${JSON.stringify(args)}`)
        assert.match(textOf(result), /^InvalidArguments: /)
        assert.strictEqual(entry.status, "invalid")
      }
      assert.deepStrictEqual(yield* Ref.get(asked), [], "the policy was never consulted")
      assert.deepStrictEqual(yield* ran, [], "the handler never ran")

      // The same policy is consulted, once, for a well-formed call, and sees redacted arguments.
      const { result } = yield* callAudited(tools, "wipe", { target: "t", api_key: "k-123" }).pipe(
        Effect.provideService(ConfirmPolicy, policy)
      )
      assert.isUndefined(result.isError)
      const requests = yield* Ref.get(asked)
      assert.strictEqual(requests.length, 1)
      assert.deepStrictEqual(requests[0]?.arguments, { target: "t", api_key: "[REDACTED]" })
      assert.strictEqual(requests[0]?.tier, "destructive")
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("an unknown tool is reported as UnknownTool and audited as invalid", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      const { result, entry } = yield* callAudited(tools, "nope", { a: 1 })
      assert.isTrue(result.isError)
      assert.strictEqual(textOf(result), "UnknownTool: name: no tool has this name (tools/list names them)")
      assert.strictEqual(entry.status, "invalid")
      assert.strictEqual(entry.tool, "nope")
      assert.deepStrictEqual(entry.error, {
        tag: "UnknownTool",
        message: "name: no tool has this name (tools/list names them)"
      })
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )
})

describe("argument validation", () => {
  const cases: ReadonlyArray<readonly [string, string, unknown, RegExp]> = [
    ["missing field", "look", {}, /^InvalidArguments: text: is missing/],
    ["missing field, other present", "look", { times: 2 }, /^InvalidArguments: text: is missing/],
    ["extra field", "look", { text: "a", colour: "red" }, /^InvalidArguments: colour: is unexpected/],
    ["ill-typed field", "look", { text: 5 }, /^InvalidArguments: text: Expected string$/],
    ["ill-typed optional field", "look", { text: "a", times: 1.5 }, /^InvalidArguments: times: /],
    ["null field", "save", { value: null }, /^InvalidArguments: value: Expected number$/],
    ["not an object", "save", 42, /^InvalidArguments: arguments must be an object$/],
    ["an array", "save", [{ value: 1 }], /^InvalidArguments: arguments must be an object$/],
    ["extra field on a tool without fields", "purge", { x: 1 }, /^InvalidArguments: x: is unexpected/]
  ]
  for (const [title, tool, args, expected] of cases) {
    it.effect(`${title} is rejected naming the field`, () =>
      Effect.gen(function* () {
        const { tools, ran } = yield* makeExampleTools
        const { result, entry } = yield* callAudited(tools, tool, args)
        assert.isTrue(result.isError)
        assert.isUndefined(result.structuredContent)
        assert.match(textOf(result), expected)
        assert.strictEqual(entry.status, "invalid")
        assert.strictEqual(entry.error?.tag, "InvalidArguments")
        assert.deepStrictEqual(yield* ran, [])
      }).pipe(Effect.provide(auditLogMemoryLayer))
    )
  }

  it.effect("absent arguments count as an empty object", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      const { result, entry } = yield* callAudited(tools, "look", undefined)
      assert.strictEqual(textOf(result), "InvalidArguments: text: is missing")
      assert.deepStrictEqual(entry.arguments, {})
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )
})

describe("running", () => {
  it.effect("success: structuredContent is the encoded output and the text is the same JSON", () =>
    Effect.gen(function* () {
      const { tools, ran } = yield* makeExampleTools
      yield* TestClock.setTime(Date.UTC(2025, 2, 1, 12))
      const { result, entry } = yield* callAudited(tools, "look", { text: "abc", times: 2 })
      assert.isUndefined(result.isError)
      assert.deepStrictEqual(result.structuredContent, { length: "6", text: "abc" })
      assert.strictEqual(result.content.length, 1)
      assert.strictEqual(result.content[0]?.type, "text")
      assert.deepStrictEqual(JSON.parse(textOf(result)), result.structuredContent)
      assert.deepStrictEqual(yield* ran, ["look"])
      assert.deepStrictEqual(entry, {
        time: "2025-03-01T12:00:00.000Z",
        server: "test",
        tool: "look",
        status: "ok",
        duration_ms: 0,
        arguments: { text: "abc", times: 2 },
        error: null
      })
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("write and read-only tools run with no ConfirmPolicy in context", () =>
    Effect.gen(function* () {
      const { tools, ran } = yield* makeExampleTools
      const saved = yield* callAudited(tools, "save", { value: 3 }, inProcessContext("srv"))
      assert.deepStrictEqual(saved.result.structuredContent, { saved: 3 })
      assert.strictEqual(saved.entry.server, "srv")
      assert.strictEqual(saved.entry.status, "ok")
      assert.deepStrictEqual(yield* ran, ["save"])
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("a tool past its timeout answers ToolTimeout and is audited as timeout", () =>
    Effect.gen(function* () {
      const { tools, ran } = yield* makeExampleTools
      const fiber = yield* Effect.fork(callAudited(tools, "slow", {}))
      yield* TestClock.adjust(`${TimeoutMillis} millis`)
      const { result, entry } = yield* Fiber.join(fiber)
      assert.isTrue(result.isError)
      assert.strictEqual(textOf(result), `ToolTimeout: slow did not finish within ${TimeoutMillis} ms`)
      assert.strictEqual(entry.status, "timeout")
      assert.strictEqual(entry.duration_ms, TimeoutMillis)
      assert.deepStrictEqual(entry.error?.tag, "ToolTimeout")
      assert.deepStrictEqual(yield* ran, ["slow"], "the handler started and was cut off")
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("a defect answers InternalError without its message or stack, audited as error", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      const { result, entry } = yield* callAudited(tools, "crash", {})
      assert.isTrue(result.isError)
      const text = textOf(result)
      assert.match(text, /^InternalError: /)
      assert.notInclude(text, DefectSecret)
      assert.notMatch(text, /\bat .*:\d+/, "no stack frames")
      assert.strictEqual(entry.status, "error")
      assert.strictEqual(entry.error?.tag, "InternalError")
      assert.notInclude(JSON.stringify(entry), DefectSecret)
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("a tagged failure answers its tag and message, audited as error", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      const { result, entry } = yield* callAudited(tools, "fail", { detail: "fuse" })
      assert.isTrue(result.isError)
      assert.strictEqual(textOf(result), "Kaboom: it went off: fuse")
      assert.strictEqual(entry.status, "error")
      assert.deepStrictEqual(entry.error, { tag: "Kaboom", message: "it went off: fuse" })
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )
})

describe("audit", () => {
  it.effect("every call appends exactly one entry with its status, tool, server and duration", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      const calls: ReadonlyArray<readonly [string, unknown, string]> = [
        ["look", { text: "x" }, "ok"],
        ["save", { value: 1 }, "ok"],
        ["save", { value: "1" }, "invalid"],
        ["wipe", { target: "a" }, "denied"],
        ["fail", { detail: "d" }, "error"],
        ["crash", {}, "error"],
        ["ghost", {}, "invalid"]
      ]
      for (const [name, args, status] of calls) {
        yield* TestClock.adjust("7 millis")
        const { entry } = yield* callAudited(tools, name, args, inProcessContext("audit-server"))
        assert.strictEqual(entry.status, status, name)
        assert.strictEqual(entry.tool, name)
        assert.strictEqual(entry.server, "audit-server")
        assert.isAtLeast(entry.duration_ms, 0)
      }
      const all = yield* Effect.flatMap(AuditLog, (audit) => audit.list({}))
      assert.deepStrictEqual(
        all.map((entry) => [entry.tool, entry.status]),
        calls.map(([name, , status]) => [name, status])
      )
      // Calls through the bare pipeline (not the helper) are audited the same way.
      yield* callTool(tools, "look", { text: "y" }, inProcessContext("audit-server"))
      assert.strictEqual(
        (yield* Effect.flatMap(AuditLog, (audit) => audit.list({}))).length,
        calls.length + 1
      )
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("only a read-only call that succeeded is answered before its entry's fsync", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      const asked = yield* Ref.make<ReadonlyArray<readonly [string, string, string]>>([])
      const spy = AuditLog.of({
        append: (entry, options) =>
          Ref.update(asked, (all): ReadonlyArray<readonly [string, string, string]> => [
            ...all,
            [entry.tool, entry.status, options?.durability ?? "synced"]
          ]),
        list: () => Effect.succeed([]),
        prune: () => Effect.succeed({ removed: 0, kept: 0 })
      })
      const calls: ReadonlyArray<readonly [string, unknown]> = [
        ["look", { text: "x" }],
        ["look", {}],
        ["save", { value: 1 }],
        ["wipe", { target: "a" }],
        ["fail", { detail: "d" }],
        ["ghost", {}]
      ]
      for (const [name, args] of calls)
        yield* callTool(tools, name, args, inProcessContext("s")).pipe(Effect.provideService(AuditLog, spy))
      assert.deepStrictEqual(yield* Ref.get(asked), [
        ["look", "ok", "written"],
        ["look", "invalid", "synced"],
        ["save", "ok", "synced"],
        ["wipe", "denied", "synced"],
        ["fail", "error", "synced"],
        ["ghost", "invalid", "synced"]
      ])
    })
  )
})
