/** Receipts for attempts that were stopped or failed before there was an answer to read. */
import { OutputTooLarge, ProviderFailed, ProviderTimeout } from "../domain/errors.js"
import type { AttemptReceipt } from "../domain/provider.js"
import { isoTime } from "../domain/time.js"

/** The receipt of a run that ended without output to read: times and identity, nothing else. */
export const stoppedReceipt = (
  provider: string,
  requestedModel: string,
  startedAt: number,
  endedAt: number,
  source: string
): AttemptReceipt => ({
  provider,
  requested_model: requestedModel,
  model: null,
  model_evidence: { verified: false, source },
  started_at: isoTime(startedAt),
  ended_at: isoTime(endedAt),
  duration_ms: endedAt - startedAt,
  exit_code: null,
  http_status: null,
  usage: null,
  cost_usd: null,
  output_sha256: null,
  output_bytes: null
})

/** The same failure, carrying `receipt` unless it has one already. */
export const withReceipt = (
  error: ProviderFailed | ProviderTimeout | OutputTooLarge,
  receipt: AttemptReceipt
): ProviderFailed | ProviderTimeout | OutputTooLarge => {
  const detail = {
    ...(error.stderr_tail === undefined ? {} : { stderr_tail: error.stderr_tail }),
    ...(error.stdout_error === undefined ? {} : { stdout_error: error.stdout_error }),
    receipt: error.receipt ?? receipt
  }
  switch (error._tag) {
    case "ProviderFailed":
      return new ProviderFailed({
        provider: error.provider,
        reason: error.reason,
        retryable: error.retryable,
        ...detail
      })
    case "ProviderTimeout":
      return new ProviderTimeout({ provider: error.provider, millis: error.millis, ...detail })
    case "OutputTooLarge":
      return new OutputTooLarge({ provider: error.provider, limitBytes: error.limitBytes, ...detail })
  }
}
