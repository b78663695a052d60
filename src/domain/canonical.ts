import { createHash, createHmac } from "node:crypto"
import { LoneSurrogate } from "./ids.js"

/**
 * RFC 8785 (JSON Canonicalization Scheme) serialization of a JSON value.
 * Object keys are sorted by UTF-16 code units and numbers use ECMAScript's shortest
 * round-trip form, which is exactly what `JSON.stringify` emits for a finite number.
 * Throws on values JSON cannot represent; callers pass values decoded from JSON.
 */
export const canonicalJson = (value: unknown): string => {
  if (value === null) return "null"
  switch (typeof value) {
    case "boolean":
      return value ? "true" : "false"
    case "string":
      return quote(value)
    case "number":
      if (!Number.isFinite(value)) throw new TypeError("non-finite number in JSON value")
      return JSON.stringify(value)
    case "object": {
      if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
      const entries = Object.keys(value)
        .sort()
        .flatMap((key) => {
          const member: unknown = Reflect.get(value, key)
          return member === undefined ? [] : [`${quote(key)}:${canonicalJson(member)}`]
        })
      return `{${entries.join(",")}}`
    }
    default:
      throw new TypeError(`${typeof value} is not a JSON value`)
  }
}

/** A JSON string; unpaired surrogates are refused, since hashing would fold them together. */
const quote = (text: string): string => {
  if (LoneSurrogate.test(text))
    throw new TypeError("a string is not well-formed Unicode (unpaired surrogate)")
  return JSON.stringify(text)
}

export const sha256Hex = (data: string | Uint8Array): string =>
  createHash("sha256").update(data).digest("hex")

export const hmacSha256Hex = (key: Uint8Array, data: string): string =>
  createHmac("sha256", key).update(data, "utf8").digest("hex")
