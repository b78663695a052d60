import { Effect, Schema } from "effect"
import { InvalidPayload } from "../domain/errors.js"
import { describeParseError } from "../domain/input.js"
import type { JsonObject } from "../domain/Task.js"
import { ProviderPayload } from "../domain/provider.js"

const decode = Schema.decodeUnknown(ProviderPayload, { errors: "first", onExcessProperty: "error" })

/** A provider's payload: exactly `{provider, model, prompt}`, checked before anything starts. */
export const decodePayload = (
  provider: ProviderPayload["provider"],
  payload: JsonObject
): Effect.Effect<ProviderPayload, InvalidPayload> =>
  decode(payload).pipe(
    Effect.mapError((error) => new InvalidPayload({ provider, reason: describeParseError(error) })),
    Effect.filterOrFail(
      (decoded) => decoded.provider === provider,
      () => new InvalidPayload({ provider, reason: `provider must be ${provider}` })
    )
  )
