/**
 * Our own JSON parser, for every place JSON enters RelayKeep (CLI payloads, dashboard bodies,
 * MCP messages, stored records): what it returns is exactly what was sent, or it says why not.
 *
 * - A duplicate key is refused (JSON.parse keeps the last one silently).
 * - `__proto__`, `constructor` and `prototype` are ordinary keys, kept as own data properties.
 * - Strict mode (the default) refuses what a double cannot hold apart: every number beyond
 *   ±(2^53−1), in any notation, and a nonzero number so small that it reads as 0; and strings
 *   that are not well-formed Unicode (a lone surrogate), as I-JSON (RFC 7493) does.
 * - Nesting is bounded (`maxDepth`), and the parser keeps its own stack, so even a message
 *   nested a million levels deep cannot overflow the call stack.
 * - An error gives the JSON path, the rule and the line and column, and never a slice of the
 *   input: the input may be a secret.
 */
import { Either } from "effect"
import type { Broken } from "./jsonTokens.js"
import {
  defineMember,
  isBroken,
  lineAndColumn,
  readNumber,
  readString,
  skipWhitespace
} from "./jsonTokens.js"

export type JsonPath = ReadonlyArray<string | number>

export interface JsonSyntaxError {
  readonly path: JsonPath
  readonly rule: string
  readonly line: number
  readonly column: number
}

export interface JsonParseOptions {
  /** Containers nested deeper than this are refused (default DefaultMaxDepth). */
  readonly maxDepth?: number
  /** Refuse numbers and strings a double or a hash cannot hold exactly (default true). */
  readonly strict?: boolean
  /**
   * Instead of refusing a container nested deeper than `maxDepth`, check its syntax and put
   * `Elided` in its place; `elided` lists the paths. The MCP transport uses this to answer a
   * too-deep call as a tool error, which is audited.
   */
  readonly elide?: boolean
}

export interface ParsedJson {
  readonly value: unknown
  readonly elided: ReadonlyArray<JsonPath>
}

export const DefaultMaxDepth = 1000

/** Stands for a container beyond `maxDepth` when parsing with `elide`. */
export const Elided: Readonly<Record<string, never>> = Object.freeze({})

/** A key is shown as is when it looks like a name, else quoted (and cut, if long). */
const SimpleKey = /^[A-Za-z0-9_$-]{1,64}$/
const pathSegment = (segment: string | number): string =>
  typeof segment === "number" || SimpleKey.test(segment)
    ? String(segment)
    : JSON.stringify(segment.length > 40 ? `${segment.slice(0, 40)}…` : segment)

/** A path as `a.b.0.c`; a very long one keeps its start and its end. */
export const jsonPathText = (path: JsonPath): string =>
  (path.length > 16
    ? [
        ...path.slice(0, 10).map(pathSegment),
        `…${path.length - 14} more…`,
        ...path.slice(-4).map(pathSegment)
      ]
    : path.map(pathSegment)
  ).join(".")

/** `a.b: duplicate key (line 1, column 12)`. */
export const describeJsonError = (error: JsonSyntaxError): string =>
  `${error.path.length > 0 ? `${jsonPathText(error.path)}: ` : ""}${error.rule} (line ${error.line}, column ${error.column})`

interface Frame {
  /** The character that closes it: `]` or `}`. */
  readonly close: number
  /** What is being built, or undefined inside an elided container. */
  readonly items: Array<unknown> | undefined
  readonly members: Record<string, unknown> | undefined
  /** The key of the member being read; undefined while the key itself is read. */
  key: string | undefined
}

/** Inside an elided container nothing is built. */
const builds = (frame: Frame): boolean => frame.items !== undefined || frame.members !== undefined

const Comma = 0x2c
const Colon = 0x3a
const Quote = 0x22
const OpenBracket = 0x5b
const CloseBracket = 0x5d
const OpenBrace = 0x7b
const CloseBrace = 0x7d

/** Parse `text` as one JSON value; see the module comment for the rules. */
export const parseJsonWith = (
  text: string,
  options: JsonParseOptions = {}
): Either.Either<ParsedJson, JsonSyntaxError> => {
  const maxDepth = options.maxDepth ?? DefaultMaxDepth
  const strict = options.strict ?? true
  const stack: Array<Frame> = []
  const elided: Array<JsonPath> = []
  let pos = 0

  /** The path of the value being read; `container` leaves out the member in progress. */
  const pathOf = (container: boolean): Array<string | number> => {
    const path: Array<string | number> = []
    for (const [index, frame] of stack.entries()) {
      const segment = frame.items !== undefined ? frame.items.length : frame.key
      if (!builds(frame)) break
      if (segment === undefined || (container && index === stack.length - 1)) break
      path.push(segment)
    }
    return path
  }
  const failure = (rule: string, at: number, container = false): JsonSyntaxError => ({
    path: pathOf(container),
    rule,
    ...lineAndColumn(text, at)
  })
  const fail = (rule: string, at: number, container = false) => Either.left(failure(rule, at, container))
  const broken = (token: Broken): JsonSyntaxError => failure(token.rule, token.at)
  const skip = () => {
    pos = skipWhitespace(text, pos)
  }

  /** After `{` or `,` in an object: the key and its colon. */
  const readKey = (frame: Frame): JsonSyntaxError | undefined => {
    frame.key = undefined
    skip()
    if (text.charCodeAt(pos) !== Quote) return failure("expected a string key", pos)
    const at = pos
    const key = readString(text, pos, strict)
    if (isBroken(key)) return broken(key)
    pos = key.end
    frame.key = key.value
    if (frame.members !== undefined && Object.hasOwn(frame.members, key.value))
      return failure("duplicate key", at)
    skip()
    if (text.charCodeAt(pos) !== Colon) return failure("expected ':' after a key", pos)
    pos += 1
    return undefined
  }

  for (;;) {
    // A value starts here.
    skip()
    const code = text.charCodeAt(pos)
    let value: unknown
    if (code === OpenBracket || code === OpenBrace) {
      const at = pos
      const deep = stack.length >= maxDepth
      if (deep && !options.elide) return fail(`nested deeper than ${maxDepth} levels`, at)
      const parent = stack[stack.length - 1]
      const insideBuilt = parent === undefined || builds(parent)
      if (deep && insideBuilt) elided.push(pathOf(false))
      const building = !deep && insideBuilt
      const isArray = code === OpenBracket
      const frame: Frame = {
        close: isArray ? CloseBracket : CloseBrace,
        items: building && isArray ? [] : undefined,
        members: building && !isArray ? {} : undefined,
        key: undefined
      }
      stack.push(frame)
      pos += 1
      skip()
      if (text.charCodeAt(pos) !== frame.close) {
        if (!isArray) {
          const keyError = readKey(frame)
          if (keyError !== undefined) return Either.left(keyError)
        }
        continue
      }
      pos += 1
      stack.pop()
      value = frame.items ?? frame.members ?? Elided
    } else if (code === Quote) {
      const read = readString(text, pos, strict)
      if (isBroken(read)) return Either.left(broken(read))
      pos = read.end
      value = read.value
    } else if (text.startsWith("true", pos)) {
      value = true
      pos += 4
    } else if (text.startsWith("false", pos)) {
      value = false
      pos += 5
    } else if (text.startsWith("null", pos)) {
      value = null
      pos += 4
    } else {
      const read = readNumber(text, pos, strict)
      if (isBroken(read)) return Either.left(broken(read))
      pos = read.end
      value = read.value
    }

    // The value ends here: put it in its container, and close every container that ends with it.
    for (;;) {
      const frame = stack[stack.length - 1]
      if (frame === undefined) {
        skip()
        if (pos < text.length) return fail("more text after the JSON value", pos)
        return Either.right({ value, elided })
      }
      if (frame.items !== undefined) frame.items.push(value)
      else if (frame.members !== undefined && frame.key !== undefined)
        defineMember(frame.members, frame.key, value)
      skip()
      const next = text.charCodeAt(pos)
      if (next === Comma) {
        pos += 1
        if (frame.close === CloseBrace) {
          const keyError = readKey(frame)
          if (keyError !== undefined) return Either.left(keyError)
        }
        break
      }
      if (next !== frame.close)
        return fail(`expected ',' or '${frame.close === CloseBrace ? "}" : "]"}'`, pos, true)
      pos += 1
      stack.pop()
      value = frame.items ?? frame.members ?? Elided
    }
  }
}

/** Parse `text` as one JSON value, refusing anything nested deeper than `maxDepth`. */
export const parseJson = (
  text: string,
  options: Omit<JsonParseOptions, "elide"> = {}
): Either.Either<unknown, JsonSyntaxError> =>
  Either.map(parseJsonWith(text, options), (parsed) => parsed.value)
