import { Effect, Schema } from "effect"
import { InvalidPayload } from "../domain/errors.js"
import { describeParseError } from "../domain/input.js"
import type { JsonObject } from "../domain/Task.js"
import { ProviderPayload } from "../domain/provider.js"

const decode = Schema.decodeUnknown(ProviderPayload, { errors: "first", onExcessProperty: "error" })

/**
 * A provider's payload: exactly `{provider, model, prompt}` (and for a CLI, an optional
 * `work_dir`), checked before anything starts.
 */
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

/** The directory a CLI payload asks to run in, if it names one. */
export const payloadWorkDir = (payload: ProviderPayload): string | undefined =>
  "work_dir" in payload ? payload.work_dir : undefined
