/**
 * The tokens of JSON, for the parser in json.ts: whitespace, strings, numbers, and how a
 * member is kept. Pure functions over (text, offset); a broken token gives its rule and
 * offset, never its text.
 */
import { LoneSurrogate } from "./ids.js"

/** A token read: its value and the offset just past it. */
export interface Token<A> {
  readonly value: A
  readonly end: number
}

/** A token that breaks a rule, at an offset. */
export interface Broken {
  readonly rule: string
  readonly at: number
}

export const isBroken = <A>(read: Token<A> | Broken): read is Broken => "rule" in read

const Whitespace = /[ \t\n\r]*/y

/** The offset of the first character at or after `at` that is not JSON whitespace. */
export const skipWhitespace = (text: string, at: number): number => {
  Whitespace.lastIndex = at
  Whitespace.test(text)
  return Whitespace.lastIndex
}

// A run of string characters that need no attention: no quote, backslash or control character.
// eslint-disable-next-line no-control-regex
const Plain = /[^"\\\u0000-\u001f]*/y
const Hex4 = /^[0-9A-Fa-f]{4}$/
const Escapes = new Map([
  ['"', '"'],
  ["\\", "\\"],
  ["/", "/"],
  ["b", "\b"],
  ["f", "\f"],
  ["n", "\n"],
  ["r", "\r"],
  ["t", "\t"]
])

/**
 * The string whose opening quote is at `start`. In strict mode a lone surrogate is refused:
 * it has no UTF-8 form, so a hash could not tell two such strings apart.
 */
export const readString = (text: string, start: number, strict: boolean): Token<string> | Broken => {
  let value = ""
  let at = start + 1
  for (;;) {
    Plain.lastIndex = at
    Plain.test(text)
    value += text.slice(at, Plain.lastIndex)
    at = Plain.lastIndex
    const code = text.charCodeAt(at)
    if (code === 0x22) break
    if (Number.isNaN(code)) return { rule: "a string is not closed", at: start }
    if (code !== 0x5c) return { rule: "a control character in a string must be escaped", at }
    const escape = text.charAt(at + 1)
    const simple = Escapes.get(escape)
    const hex = text.slice(at + 2, at + 6)
    if (simple !== undefined) {
      value += simple
      at += 2
    } else if (escape === "u" && Hex4.test(hex)) {
      value += String.fromCharCode(Number.parseInt(hex, 16))
      at += 6
    } else return { rule: "an invalid escape in a string", at }
  }
  if (strict && LoneSurrogate.test(value))
    return { rule: "a string is not well-formed Unicode (a lone surrogate)", at: start }
  return { value, end: at + 1 }
}

const NumberToken = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y
const NonzeroMantissa = /^[^eE]*[1-9]/

/**
 * The number at `start`, read as the nearest double. In strict mode, numbers a double cannot
 * hold apart are refused: every number beyond ±(2^53−1) (whatever the notation: `9007199254740993`,
 * `1e16`), where neighbouring integers share one double, and a nonzero one that reads as 0.
 */
export const readNumber = (text: string, start: number, strict: boolean): Token<number> | Broken => {
  NumberToken.lastIndex = start
  if (!NumberToken.test(text)) return { rule: "expected a JSON value", at: start }
  const end = NumberToken.lastIndex
  const token = text.slice(start, end)
  const value = Number(token)
  if (strict && !(Math.abs(value) <= Number.MAX_SAFE_INTEGER))
    return { rule: "a number beyond ±(2^53−1) cannot be held exactly", at: start }
  if (strict && value === 0 && NonzeroMantissa.test(token))
    return { rule: "a number too small for a double (it would read as 0)", at: start }
  return { value, end }
}

/** Keep a member as an own data property: assigning `__proto__` would set the prototype instead. */
export const defineMember = (members: Record<string, unknown>, key: string, value: unknown): void => {
  if (key === "__proto__")
    Object.defineProperty(members, key, { value, writable: true, enumerable: true, configurable: true })
  else members[key] = value
}

/** Line and column (both from 1, the column in UTF-16 units) of an offset. */
export const lineAndColumn = (text: string, offset: number) => {
  let line = 1
  let start = 0
  for (let at = text.indexOf("\n"); at !== -1 && at < offset; at = text.indexOf("\n", at + 1)) {
    line += 1
    start = at + 1
  }
  return { line, column: offset - start + 1 }
}
