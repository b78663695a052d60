/**
 * The checks `relaykeep submit` and the API apply to a submission, run before sending so the
 * form can say what is wrong at once. The API checks again; its answer is shown as well.
 * (src/domain/ids.ts ClientRequestId, src/domain/Task.ts JsonObject, src/domain/submission.ts.)
 */
export const MaxPayloadBytes = 1024 * 1024

// eslint-disable-next-line no-control-regex
const Printable = /^[^\u0000-\u001f\u007f-\u009f]+$/u
const LoneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

export type Checked<A> =
  { readonly ok: true; readonly value: A } | { readonly ok: false; readonly reason: string }

/** A request id: empty means "let the server pick one"; else 1-200 printable characters. */
export const checkRequestId = (id: string): Checked<string | null> => {
  if (id === "") return { ok: true, value: null }
  if (LoneSurrogate.test(id)) return { ok: false, reason: "request id: must be well-formed Unicode" }
  if (id.length > 200) return { ok: false, reason: "request id: must be at most 200 characters" }
  if (!Printable.test(id)) return { ok: false, reason: "request id: must contain printable characters only" }
  return { ok: true, value: id }
}

/** A payload: JSON text of an object (not an array, not null), at most 1 MiB as UTF-8. */
export const checkPayload = (source: string): Checked<{ readonly [key: string]: unknown }> => {
  let value: unknown
  try {
    value = JSON.parse(source)
  } catch (error) {
    return {
      ok: false,
      reason: `payload: not valid JSON (${error instanceof Error ? error.message : String(error)})`
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { ok: false, reason: "payload: must be a JSON object" }
  }
  // The server measures the canonical form, which is never longer than this one.
  const bytes = new TextEncoder().encode(JSON.stringify(value)).length
  if (bytes > MaxPayloadBytes) {
    return { ok: false, reason: `payload: is ${bytes} bytes; the limit is ${MaxPayloadBytes} bytes` }
  }
  const entries: { [key: string]: unknown } = {}
  for (const [key, entry] of Object.entries(value)) entries[key] = entry
  return { ok: true, value: entries }
}
