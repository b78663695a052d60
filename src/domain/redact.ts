/**
 * Redaction of any JSON value before it reaches an audit file, an answer or stderr, by the
 * rules of redactRules.ts (names) and redactText.ts (text). SECURITY.md says what it covers.
 */
import { isSensitiveName } from "./redactRules.js"
import { Redacted, redactText } from "./redactText.js"

export { Redacted } from "./redactText.js"
export { isSensitiveName } from "./redactRules.js"

/** Whether values under `key` are secrets (an alias of isSensitiveName, kept for library users). */
export const isSensitiveKey = (key: string): boolean => isSensitiveName(key)

/** Error text and stderr lines: the text rules only (a message has no keys). */
export const redactMessage = (text: string): string => redactText(text)

/** The members that name a header or field in a `{name, value}` pair, lower-cased. */
const NameMembers: ReadonlySet<string> = new Set(["name", "key", "header", "field"])
/** The members that hold its value. */
const ValueMembers: ReadonlySet<string> = new Set(["value", "values", "val", "content"])

/** A string that could be a header or field name: short, and one word. */
const sensitiveNameText = (value: unknown): boolean =>
  typeof value === "string" && value.length <= 128 && !/\s/.test(value) && isSensitiveName(value)

/** `{"name": "Authorization", "value": …}`: the pair's name says its value is a secret. */
const namesSecret = (entries: ReadonlyArray<readonly [string, unknown]>): boolean =>
  entries.some(([key, member]) => NameMembers.has(key.toLowerCase()) && sensitiveNameText(member))

/** `["Authorization", …]`: a name and its value. */
const isSecretPair = (items: ReadonlyArray<unknown>): boolean =>
  items.length === 2 && sensitiveNameText(items[0])

interface Pending {
  readonly value: unknown
  readonly put: (copy: unknown) => void
}

/** Define a member, so that a `__proto__` key stays an ordinary key (assigning would set the prototype). */
const define = (target: object, key: string, value: unknown) =>
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true })

/**
 * A redacted copy of `value`: every value under a sensitive key replaced, at any depth; the
 * value of a sensitive header pair (`{name, value}` or `[name, value]`) replaced; every string
 * (and every key) scrubbed by the text rules. The input is not changed. It keeps its own stack,
 * so a value nested a million levels deep is redacted like any other.
 */
export const redact = (value: unknown): unknown => {
  let result: unknown
  const pending: Array<Pending> = [{ value, put: (copy) => (result = copy) }]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { put, value: current } = next
    if (typeof current === "string") put(redactText(current))
    else if (Array.isArray(current)) {
      const copy: Array<unknown> = new Array<unknown>(current.length).fill(null)
      put(copy)
      const pair = isSecretPair(current)
      current.forEach((item: unknown, index) => {
        if (pair && index === 1) copy[index] = Redacted
        else pending.push({ value: item, put: (member) => (copy[index] = member) })
      })
    } else if (current !== null && typeof current === "object") {
      const entries = Object.entries(current)
      // In a `{name, value}` pair the name is judged as a name, not as a key: `{"key": "Accept"}`.
      const pair = entries.some(([key]) => ValueMembers.has(key.toLowerCase()))
      const pairSecret = pair && namesSecret(entries)
      const copy: object = {}
      put(copy)
      // Every key is defined first, in order, and given its value when it is ready.
      for (const [key, member] of entries) {
        const shownKey = redactText(key)
        define(copy, shownKey, null)
        const lower = key.toLowerCase()
        const sensitive = pair && NameMembers.has(lower) ? false : isSensitiveName(key)
        if (sensitive || (pairSecret && ValueMembers.has(lower))) define(copy, shownKey, Redacted)
        else pending.push({ value: member, put: (redacted) => define(copy, shownKey, redacted) })
      }
    } else put(current)
  }
  return result
}
