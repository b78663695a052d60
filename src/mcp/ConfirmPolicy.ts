import { Context, Effect, Layer } from "effect"
import type { Tier } from "./Tool.js"

/** What a policy is asked: which tool, with which (already redacted) arguments. */
export interface ConfirmRequest {
  readonly tool: string
  readonly tier: Tier
  readonly arguments: unknown
  /**
   * Ask the person at the client, when the client declared the elicitation capability.
   * Resolves true only on an explicit acceptance.
   */
  readonly ask: ((message: string) => Effect.Effect<boolean>) | undefined
}

export interface Decision {
  readonly allowed: boolean
  readonly reason: string
}

/**
 * Decides whether a destructive call may run. The pipeline fails closed: with no policy in
 * context, every destructive call is denied.
 */
export class ConfirmPolicy extends Context.Tag("relaykeep/ConfirmPolicy")<
  ConfirmPolicy,
  { readonly confirm: (request: ConfirmRequest) => Effect.Effect<Decision> }
>() {
  /** The default: nothing destructive runs. */
  static readonly layerDenyAll = Layer.succeed(ConfirmPolicy, {
    confirm: () => Effect.succeed({ allowed: false, reason: "destructive tools are denied by policy" })
  })

  /** Destructive tools named here run without asking; others are denied. */
  static readonly layerAllowlist = (tools: Iterable<string>) => {
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
  static readonly layerElicitation = Layer.succeed(ConfirmPolicy, {
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
}
