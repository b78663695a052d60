/**
 * A second, minimal RFC 8785 canonicalizer, written from the RFC and independent of
 * src/domain/canonical.ts, so that tests can check the hash a receipt carries without trusting
 * the code that made it. Keys sort by UTF-16 code units (§3.2.3); strings escape only `"`, `\`
 * and the controls, with the short forms where JSON has them (§3.2.2.2); numbers are
 * ECMAScript's Number::toString, which makes -0 "0" (§3.2.2.3).
 */
import { createHash } from "node:crypto"

const Short: Readonly<Record<number, string>> = {
  0x08: "\\b",
  0x09: "\\t",
  0x0a: "\\n",
  0x0c: "\\f",
  0x0d: "\\r"
}

const jcsString = (text: string): string => {
  let out = '"'
  for (let index = 0; index < text.length; index += 1) {
    const unit = text.charCodeAt(index)
    if (unit === 0x22) out += '\\"'
    else if (unit === 0x5c) out += "\\\\"
    else if (unit < 0x20) out += Short[unit] ?? `\\u${unit.toString(16).padStart(4, "0")}`
    else out += text.charAt(index)
  }
  return `${out}"`
}

const byUtf16Units = (a: string, b: string): number => {
  for (let index = 0; index < Math.min(a.length, b.length); index += 1) {
    const diff = a.charCodeAt(index) - b.charCodeAt(index)
    if (diff !== 0) return diff
  }
  return a.length - b.length
}

export const jcs = (value: unknown): string => {
  if (value === null) return "null"
  if (typeof value === "boolean") return value ? "true" : "false"
  if (typeof value === "number") return Object.is(value, -0) ? "0" : String(value)
  if (typeof value === "string") return jcsString(value)
  if (Array.isArray(value)) return `[${value.map(jcs).join(",")}]`
  if (typeof value !== "object") throw new TypeError(`not JSON: ${typeof value}`)
  const names = Reflect.ownKeys(value).filter((key): key is string => typeof key === "string")
  return `{${names
    .sort(byUtf16Units)
    .map((name) => `${jcsString(name)}:${jcs(Object.getOwnPropertyDescriptor(value, name)?.value)}`)
    .join(",")}}`
}

/** The payload hash a receipt must carry: SHA-256 of the UTF-8 of the canonical form. */
export const jcsSha256 = (value: unknown): string =>
  createHash("sha256").update(jcs(value), "utf8").digest("hex")
