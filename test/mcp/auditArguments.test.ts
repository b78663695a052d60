/**
 * What the audit log keeps of a call's arguments: redacted, at most 64 levels and 16 KiB of
 * JSON, saying what was cut; and the pipeline refuses arguments deeper than 64 levels, audited.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { auditedArguments, deeperThan } from "../../src/mcp/auditArguments.js"
import { auditLogMemoryLayer } from "../../src/mcp/auditLayer.js"
import { MaxArgumentDepth, MaxAuditedArgumentBytes } from "../../src/mcp/limits.js"
import { callAudited, makeExampleTools, textOf } from "./inProcess.js"

/** `levels` nested objects, the outermost included: `{"a":{"a":…{}}}`. */
const nested = (levels: number): unknown => {
  let value: unknown = {}
  for (let level = 1; level < levels; level += 1) value = { a: value }
  return value
}

const bytesOf = (value: unknown) => Buffer.byteLength(JSON.stringify(value), "utf8")

describe("auditedArguments", () => {
  it("measures depth without recursion: the arguments object is level 1", () => {
    assert.isFalse(deeperThan(nested(64), 64))
    assert.isTrue(deeperThan(nested(65), 64))
    assert.isFalse(deeperThan("text", 0))
    assert.isTrue(deeperThan([[[]]], 2))
    assert.isTrue(deeperThan(nested(1_000_000), 64), "a million levels, no stack overflow")
  })

  it("keeps small arguments whole, redacted, with their __proto__ keys, and says nothing was cut", () => {
    const args = JSON.parse('{"payload":{"__proto__":{"x":1},"api_key":"k-1"}}')
    const audited = auditedArguments(args)
    assert.isUndefined(audited.truncated)
    assert.strictEqual(
      JSON.stringify(audited.arguments),
      '{"payload":{"__proto__":{"x":1},"api_key":"[REDACTED]"}}'
    )
  })

  it("cuts arguments below 64 levels, saying so, and redacts what is kept", () => {
    const audited = auditedArguments({ token: "t-1", deep: nested(5000) })
    assert.deepStrictEqual(audited.truncated, {
      original_bytes: null,
      reason: `nested deeper than ${MaxArgumentDepth} levels, cut there`
    })
    assert.include(
      JSON.stringify(audited.arguments),
      `"[cut: nested deeper than ${MaxArgumentDepth} levels]"`
    )
    assert.include(JSON.stringify(audited.arguments), '"token":"[REDACTED]"')
    assert.isFalse(deeperThan(audited.arguments, MaxArgumentDepth))
  })

  it("shortens arguments over 16 KiB, saying how big they were, and never keeps more than the cap", () => {
    const payload = {
      prompt: "p".repeat(9_000_000),
      items: Array.from({ length: 5000 }, (_, index) => index)
    }
    const audited = auditedArguments({ client_request_id: "big", payload })
    assert.strictEqual(audited.truncated?.original_bytes, bytesOf({ client_request_id: "big", payload }))
    assert.match(
      audited.truncated?.reason ?? "",
      /^over 16384 bytes of JSON, so long strings, arrays and objects were shortened$/
    )
    assert.isAtMost(bytesOf(audited.arguments), MaxAuditedArgumentBytes)
    const kept = JSON.stringify(audited.arguments)
    assert.include(kept, '"client_request_id":"big"')
    assert.include(kept, `…[+${9_000_000 - 1024} characters]`)
    assert.include(kept, `"…[+${5000 - 32} items]"`)
  })

  it("keeps nothing but the note when even the shortest form is too big (keys are kept whole)", () => {
    const wide = Object.fromEntries(
      Array.from({ length: 50 }, (_, index) => [`key-${index}-${"k".repeat(4000)}`, 1])
    )
    const audited = auditedArguments(wide)
    assert.strictEqual(audited.arguments, null)
    assert.match(audited.truncated?.reason ?? "", /still too long, so none are kept$/)
  })
})

describe("the pipeline and deep or large arguments", () => {
  it.effect(
    "arguments deeper than 64 levels are InvalidArguments, audited with a cut copy; the handler never runs",
    () =>
      Effect.gen(function* () {
        const { tools, ran } = yield* makeExampleTools
        const { result, entry } = yield* callAudited(tools, "look", { text: "x", times: nested(2200) })
        assert.isTrue(result.isError)
        assert.strictEqual(textOf(result), "InvalidArguments: arguments: nested deeper than 64 levels")
        assert.strictEqual(entry.status, "invalid")
        assert.deepStrictEqual(entry.error, {
          tag: "InvalidArguments",
          message: "arguments: nested deeper than 64 levels"
        })
        assert.strictEqual(entry.arguments_truncated?.original_bytes, null)
        assert.deepStrictEqual(yield* ran, [])
        // 64 levels are fine: the call reaches the schema, which judges `times`.
        const { result: shallow } = yield* callAudited(tools, "look", { text: "x", times: nested(63) })
        assert.match(textOf(shallow), /^InvalidArguments: times: /)
      }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("a call with 9 MB of arguments is answered, and audited in at most 16 KiB", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      const { result, entry } = yield* callAudited(tools, "look", { text: "x".repeat(9_000_000) })
      assert.isUndefined(result.isError)
      assert.isAtMost(bytesOf(entry), MaxAuditedArgumentBytes + 1024)
      assert.strictEqual(entry.arguments_truncated?.original_bytes, 9_000_000 + '{"text":""}'.length)
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )
})
