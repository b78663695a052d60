/**
 * Permission: destructive tools run only when the ConfirmPolicy allows them. No policy fails
 * closed; deny-all, the allowlist and elicitation each decide as documented. Denials are audited.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Layer } from "effect"
import { Effect, Ref } from "effect"
import { auditLogMemoryLayer } from "../../src/mcp/auditLayer.js"
import type { ConfirmPolicy } from "../../src/services/ConfirmPolicy.js"
import {
  allowlistPolicyLayer,
  denyAllPolicyLayer,
  elicitationPolicyLayer
} from "../../src/mcp/confirmPolicies.js"
import type { CallContext } from "../../src/mcp/pipeline.js"
import { inProcessContext } from "../../src/mcp/pipeline.js"
import { callAudited, makeExampleTools, textOf } from "./inProcess.js"

/** Call a destructive tool; report whether its handler ran, with the result and audit entry. */
const destroy = (tool: string, context: CallContext = inProcessContext("test")) =>
  Effect.gen(function* () {
    const { tools, ran } = yield* makeExampleTools
    const { result, entry } = yield* callAudited(tools, tool, { target: "prod", api_key: "k-9" }, context)
    return { result, entry, ran: (yield* ran).includes(tool) }
  })

const assertDenied = (outcome: Effect.Effect.Success<ReturnType<typeof destroy>>, reason: RegExp) => {
  assert.isFalse(outcome.ran, "the handler must not run")
  assert.isTrue(outcome.result.isError)
  assert.match(textOf(outcome.result), /^PermissionDenied: /)
  assert.match(textOf(outcome.result), reason)
  assert.strictEqual(outcome.entry.status, "denied")
  assert.strictEqual(outcome.entry.error?.tag, "PermissionDenied")
}

const assertRan = (outcome: Effect.Effect.Success<ReturnType<typeof destroy>>) => {
  assert.isTrue(outcome.ran)
  assert.isUndefined(outcome.result.isError)
  assert.deepStrictEqual(outcome.result.structuredContent, { deleted: "prod" })
  assert.strictEqual(outcome.entry.status, "ok")
}

const withPolicy = (policy: Layer.Layer<ConfirmPolicy>) => Effect.provide(policy)

describe("ConfirmPolicy", () => {
  it.effect("no policy in context: destructive calls are denied (fail closed)", () =>
    Effect.gen(function* () {
      assertDenied(yield* destroy("wipe"), /no confirmation policy/)
    }).pipe(Effect.provide(auditLogMemoryLayer))
  )

  it.effect("layerDenyAll denies every destructive call", () =>
    Effect.gen(function* () {
      assertDenied(yield* destroy("wipe"), /denied by policy/)
      assertDenied(yield* destroy("shred"), /denied by policy/)
    }).pipe(withPolicy(denyAllPolicyLayer), Effect.provide(auditLogMemoryLayer))
  )

  it.effect("layerDenyAll does not touch read-only or write tools", () =>
    Effect.gen(function* () {
      const { tools } = yield* makeExampleTools
      assert.strictEqual((yield* callAudited(tools, "look", { text: "a" })).entry.status, "ok")
      assert.strictEqual((yield* callAudited(tools, "save", { value: 1 })).entry.status, "ok")
    }).pipe(withPolicy(denyAllPolicyLayer), Effect.provide(auditLogMemoryLayer))
  )

  it.effect("layerAllowlist runs the tools it names and denies the others", () =>
    Effect.gen(function* () {
      assertRan(yield* destroy("wipe"))
      assertDenied(yield* destroy("shred"), /not on the allowlist/)
    }).pipe(withPolicy(allowlistPolicyLayer(["wipe"])), Effect.provide(auditLogMemoryLayer))
  )

  it.effect("layerElicitation denies when the client cannot ask", () =>
    Effect.gen(function* () {
      assertDenied(yield* destroy("wipe", inProcessContext("test")), /cannot ask/)
    }).pipe(withPolicy(elicitationPolicyLayer), Effect.provide(auditLogMemoryLayer))
  )

  it.effect("layerElicitation runs on an accepted question, with the secret redacted in it", () =>
    Effect.gen(function* () {
      const questions = yield* Ref.make<ReadonlyArray<string>>([])
      const ask = (message: string) =>
        Effect.as(
          Ref.update(questions, (all) => [...all, message]),
          true
        )
      assertRan(yield* destroy("wipe", { ...inProcessContext("test"), ask }))
      const asked = yield* Ref.get(questions)
      assert.strictEqual(asked.length, 1)
      assert.include(asked[0], "wipe")
      assert.include(asked[0], "prod")
      assert.include(asked[0], "[REDACTED]")
      assert.notInclude(asked[0], "k-9")
    }).pipe(withPolicy(elicitationPolicyLayer), Effect.provide(auditLogMemoryLayer))
  )

  it.effect("layerElicitation denies a declined question", () =>
    Effect.gen(function* () {
      const ask = () => Effect.succeed(false)
      assertDenied(yield* destroy("wipe", { ...inProcessContext("test"), ask }), /declined/)
    }).pipe(withPolicy(elicitationPolicyLayer), Effect.provide(auditLogMemoryLayer))
  )
})
