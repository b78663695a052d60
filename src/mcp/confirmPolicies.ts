/** The policies the MCP servers offer for destructive tools (`ConfirmPolicy`, src/services/). */
import { Effect, Layer } from "effect"
import type { Decision } from "../services/ConfirmPolicy.js"
import { ConfirmPolicy } from "../services/ConfirmPolicy.js"

/** The default: nothing destructive runs. */
export const denyAllPolicyLayer: Layer.Layer<ConfirmPolicy> = Layer.succeed(ConfirmPolicy, {
  confirm: () => Effect.succeed({ allowed: false, reason: "destructive tools are denied by policy" })
})

/** Destructive tools named here run without asking; others are denied. */
export const allowlistPolicyLayer = (tools: Iterable<string>): Layer.Layer<ConfirmPolicy> => {
  const allowed = new Set(tools)
  return Layer.succeed(ConfirmPolicy, {
    confirm: (request) =>
      Effect.succeed(
        allowed.has(request.tool)
          ? { allowed: true, reason: "on the allowlist" }
          : { allowed: false, reason: "not on the allowlist" }
      )
  })
}

/** Ask the person through MCP elicitation; deny when the client cannot ask or they decline. */
export const elicitationPolicyLayer: Layer.Layer<ConfirmPolicy> = Layer.succeed(ConfirmPolicy, {
  confirm: (request) => {
    const ask = request.ask
    if (ask === undefined) {
      return Effect.succeed({
        allowed: false,
        reason: "the client cannot ask for confirmation (no elicitation)"
      })
    }
    return Effect.map(
      ask(`Allow ${request.tool} with ${JSON.stringify(request.arguments)}?`),
      (accepted): Decision =>
        accepted
          ? { allowed: true, reason: "confirmed by the user" }
          : { allowed: false, reason: "declined by the user" }
    )
  }
})
