import type { Effect } from "effect"
import { Context } from "effect"
import type { Tier } from "../domain/tier.js"

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
 * context, every destructive call is denied. A policy never fails; a question it cannot ask is
 * a refusal.
 *
 * Layers: `denyAllPolicyLayer`, `allowlistPolicyLayer(names)` and `elicitationPolicyLayer`, in
 * src/mcp/confirmPolicies.ts.
 */
export class ConfirmPolicy extends Context.Tag("relaykeep/ConfirmPolicy")<
  ConfirmPolicy,
  { readonly confirm: (request: ConfirmRequest) => Effect.Effect<Decision> }
>() {}
