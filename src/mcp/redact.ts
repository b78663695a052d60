/** Recursive redaction of sensitive-looking keys, before anything reaches an audit file. */

export const Redacted = "[REDACTED]"

/**
 * Key names whose values are secrets: passwords, secrets, tokens, API and private keys,
 * authorization headers, cookies, credentials, sessions. Matched case-insensitively anywhere
 * in the key, so `db_password`, `X-Api-Key` and `refreshToken` are caught.
 */
const Sensitive =
  /pass(word|wd|phrase)?|secret|token|api[-_]?key|authori[sz]ation|auth(?!or)|cookie|private[-_]?key|credential|session|signature|bearer|access[-_]?key|client[-_]?key/i

export const isSensitiveKey = (key: string): boolean => Sensitive.test(key)

/**
 * A copy of `value` in which every value under a sensitive key, at any depth, is replaced.
 * The copy is built with `Object.fromEntries`, which defines its members: a `__proto__` key
 * stays an ordinary key, where assigning it would set the copy's prototype and vanish.
 */
export const redact = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(redact)
  if (value !== null && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value).map(([key, member]) => [key, isSensitiveKey(key) ? Redacted : redact(member)])
    )
  return value
}
