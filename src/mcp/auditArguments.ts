/**
 * What the audit log keeps of a call's arguments: redacted, at most MaxArgumentDepth levels
 * and MaxAuditedArgumentBytes of JSON. A call refused for a 9 MB payload leaves a short entry
 * that says what was cut, not 9 MB. Nothing here recurses deeper than MaxArgumentDepth: the
 * depth is measured first, with a stack of our own.
 */
import type { ArgumentsTruncated } from "../domain/audit.js"
import { MaxArgumentDepth, MaxAuditedArgumentBytes } from "./limits.js"
import { redact } from "../domain/redact.js"

/** Whether `value` nests deeper than `maxDepth` containers (a scalar is depth 0). */
export const deeperThan = (value: unknown, maxDepth: number): boolean => {
  const pending: Array<readonly [unknown, number]> = [[value, 0]]
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [member, depth] = next
    if (member === null || typeof member !== "object") continue
    if (depth + 1 > maxDepth) return true
    for (const child of Object.values(member)) pending.push([child, depth + 1])
  }
  return false
}

const members = (value: object, map: (member: unknown) => unknown): unknown =>
  Array.isArray(value)
    ? value.map(map)
    : // fromEntries defines its members: a `__proto__` key stays a key.
      Object.fromEntries(Object.entries(value).map(([key, member]) => [key, map(member)]))

/** A copy in which every container below `maxDepth` levels is replaced by a note. */
const cutBelow = (value: unknown, maxDepth: number): unknown =>
  value === null || typeof value !== "object"
    ? value
    : maxDepth === 0
      ? `[cut: nested deeper than ${MaxArgumentDepth} levels]`
      : members(value, (member) => cutBelow(member, maxDepth - 1))

interface Shortening {
  readonly characters: number
  readonly items: number
  readonly keys: number
  readonly depth: number
}

/** Tried in turn until the arguments fit. */
const Shortenings: ReadonlyArray<Shortening> = [
  { characters: 1024, items: 32, keys: 64, depth: 16 },
  { characters: 128, items: 8, keys: 16, depth: 4 },
  { characters: 32, items: 2, keys: 8, depth: 2 }
]

const shorten = (value: unknown, rule: Shortening, depth: number): unknown => {
  if (typeof value === "string") {
    if (value.length <= rule.characters) return value
    const kept = value.slice(0, rule.characters).replace(/[\uD800-\uDBFF]$/, "")
    return `${kept}…[+${value.length - kept.length} characters]`
  }
  if (value === null || typeof value !== "object") return value
  if (Array.isArray(value)) {
    if (depth >= rule.depth) return `[an array of ${value.length} items]`
    const kept = value.slice(0, rule.items).map((item) => shorten(item, rule, depth + 1))
    return value.length > rule.items ? [...kept, `…[+${value.length - rule.items} items]`] : kept
  }
  const entries = Object.entries(value)
  if (depth >= rule.depth) return `[an object of ${entries.length} keys]`
  const kept: Array<[string, unknown]> = entries
    .slice(0, rule.keys)
    .map(([key, member]) => [key, shorten(member, rule, depth + 1)])
  if (entries.length > rule.keys) kept.push(["…", `[+${entries.length - rule.keys} keys]`])
  return Object.fromEntries(kept)
}

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? "null", "utf8")

export interface AuditedArguments {
  readonly arguments: unknown
  readonly truncated: ArgumentsTruncated | undefined
}

/** The arguments as the audit entry keeps them, and what was cut. */
export const auditedArguments = (args: unknown): AuditedArguments => {
  const deep = deeperThan(args, MaxArgumentDepth)
  const redacted = redact(deep ? cutBelow(args, MaxArgumentDepth) : args)
  const bytes = jsonBytes(redacted)
  const depthNote = deep ? `nested deeper than ${MaxArgumentDepth} levels, cut there` : undefined
  if (bytes <= MaxAuditedArgumentBytes)
    return {
      arguments: redacted,
      truncated: depthNote === undefined ? undefined : { original_bytes: null, reason: depthNote }
    }
  const sizeNote = `over ${MaxAuditedArgumentBytes} bytes of JSON, so long strings, arrays and objects were shortened`
  const reason = depthNote === undefined ? sizeNote : `${depthNote}; ${sizeNote}`
  const fitting = Shortenings.map((rule) => shorten(redacted, rule, 0)).find(
    (shortened) => jsonBytes(shortened) <= MaxAuditedArgumentBytes
  )
  return {
    arguments: fitting ?? null,
    truncated: {
      original_bytes: deep ? null : bytes,
      reason: fitting === undefined ? `${reason}; still too long, so none are kept` : reason
    }
  }
}
