/** Our strict JSON parser: what it accepts is exactly what was sent, and its errors quote nothing. */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import { canonicalJson } from "../../src/domain/canonical.js"
import type { JsonParseOptions, JsonSyntaxError } from "../../src/domain/json.js"
import { describeJsonError, Elided, parseJson, parseJsonWith } from "../../src/domain/json.js"

const parsed = (text: string, options?: JsonParseOptions): unknown => {
  const result = parseJson(text, options)
  if (Either.isLeft(result)) return assert.fail(`refused: ${describeJsonError(result.left)}`)
  return result.right
}

const refused = (text: string, options?: JsonParseOptions): JsonSyntaxError => {
  const result = parseJson(text, options)
  if (Either.isRight(result)) return assert.fail("accepted")
  return result.left
}

const refusal = (text: string, options?: JsonParseOptions): string =>
  describeJsonError(refused(text, options))

describe("parseJson", () => {
  it.prop(
    "reads whatever JSON.stringify writes as JSON.parse does",
    [fc.jsonValue()],
    ([value]) => {
      const text = JSON.stringify(value, null, 1)
      assert.deepStrictEqual(parsed(text, { strict: false }), JSON.parse(text))
    },
    { fastCheck: { numRuns: 300 } }
  )

  it("reads every kind of value, escapes and whitespace", () => {
    assert.deepStrictEqual(
      parsed(
        ' \t\r\n{"a" : [1, -2.5, 3e2, 4E-1, 0, true, false, null, "x\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00"], "b": {}, "c": []}\n'
      ),
      { a: [1, -2.5, 300, 0.4, 0, true, false, null, 'x"\\/\b\f\n\r\t\u00e9\ud83d\ude00'], b: {}, c: [] }
    )
  })

  it("refuses a duplicate key at any depth, naming its path and position", () => {
    assert.strictEqual(refusal('{"a":1,"a":2}'), "a: duplicate key (line 1, column 8)")
    assert.strictEqual(
      refusal('{"x":{"y":[0,{"b":1,\n"b":2}]}}'),
      "x.y.1.b: duplicate key (line 2, column 1)"
    )
    assert.strictEqual(
      refusal('[{"ok":1},{"__proto__":1,"__proto__":2}]'),
      "1.__proto__: duplicate key (line 1, column 26)"
    )
    // Keys are compared after unescaping: "\u0061" is "a".
    assert.strictEqual(refusal('{"a":1,"\\u0061":2}'), "a: duplicate key (line 1, column 8)")
    assert.deepStrictEqual(parsed('{"a":{"a":{"a":1}}}'), { a: { a: { a: 1 } } })
  })

  it("keeps __proto__, constructor and prototype as ordinary own data", () => {
    const value = parsed(
      '{"__proto__":{"polluted":true},"constructor":{"prototype":1},"prototype":[2],"n":{"__proto__":null}}'
    )
    assert.isTrue(typeof value === "object" && value !== null)
    assert.deepStrictEqual(Object.keys(value ?? {}), ["__proto__", "constructor", "prototype", "n"])
    assert.strictEqual(Object.getPrototypeOf(value), Object.prototype, "the prototype is untouched")
    assert.isUndefined(Reflect.get(value ?? {}, "polluted"), "nothing is inherited from the key")
    assert.deepStrictEqual(Object.getOwnPropertyDescriptor(value, "__proto__"), {
      value: { polluted: true },
      writable: true,
      enumerable: true,
      configurable: true
    })
    assert.strictEqual(
      canonicalJson(value),
      '{"__proto__":{"polluted":true},"constructor":{"prototype":1},"n":{"__proto__":null},"prototype":[2]}'
    )
    assert.strictEqual(
      JSON.stringify(value),
      '{"__proto__":{"polluted":true},"constructor":{"prototype":1},"prototype":[2],"n":{"__proto__":null}}'
    )
  })

  it("refuses every number beyond ±(2^53−1), whatever its notation", () => {
    assert.strictEqual(parsed("9007199254740991"), Number.MAX_SAFE_INTEGER)
    assert.strictEqual(parsed("-9007199254740991"), -Number.MAX_SAFE_INTEGER)
    for (const text of [
      "9007199254740992",
      "9007199254740993",
      "-9007199254740992",
      "1e16",
      "9.007199254740993e15",
      "9007199254740993.0",
      "1e400",
      "-1.5e300",
      "123456789012345678901234567890"
    ])
      assert.strictEqual(
        refusal(`{"n":[${text}]}`),
        "n.0: a number beyond ±(2^53−1) cannot be held exactly (line 1, column 7)",
        text
      )
    // Without strict mode (stored records, which we wrote ourselves) a number is the nearest double.
    assert.strictEqual(parsed("9007199254740993", { strict: false }), 9007199254740992)
  })

  it("refuses a nonzero number that would read as 0, and keeps zeros, -0, exponents and fractions", () => {
    assert.strictEqual(
      refusal("[1e-400]"),
      "0: a number too small for a double (it would read as 0) (line 1, column 2)"
    )
    assert.strictEqual(
      refusal("-0.0000001e-320"),
      "a number too small for a double (it would read as 0) (line 1, column 1)"
    )
    assert.strictEqual(parsed("0e-400"), 0)
    assert.isTrue(Object.is(parsed("-0"), -0), "-0 is read as -0")
    assert.strictEqual(
      canonicalJson(parsed("[-0, 0.0, 1.0, 1e0, 10e-1, 1E+2, 2.5e-3, 5e-324]")),
      "[0,0,1,1,1,100,0.0025,5e-324]"
    )
    assert.strictEqual(
      parsed("0.1000000000000000055511151231257827"),
      0.1,
      "fractions are rounded to a double, as RFC 8785 says"
    )
  })

  it("refuses malformed JSON with the rule and the position", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["", "expected a JSON value (line 1, column 1)"],
      ["[1,2,]", "2: expected a JSON value (line 1, column 6)"],
      ['{"a":1,}', "expected a string key (line 1, column 8)"],
      ['{"a" 1}', "a: expected ':' after a key (line 1, column 6)"],
      ['{"a":1 "b":2}', "expected ',' or '}' (line 1, column 8)"],
      ["[1 2]", "expected ',' or ']' (line 1, column 4)"],
      ["01", "more text after the JSON value (line 1, column 2)"],
      ["[1] [2]", "more text after the JSON value (line 1, column 5)"],
      ["{'a':1}", "expected a string key (line 1, column 2)"],
      ["[NaN]", "0: expected a JSON value (line 1, column 2)"],
      ["[.5]", "0: expected a JSON value (line 1, column 2)"],
      ["[tru]", "0: expected a JSON value (line 1, column 2)"],
      ["\ufeff{}", "expected a JSON value (line 1, column 1)"],
      ["// note\n{}", "expected a JSON value (line 1, column 1)"],
      ['{"a":"x\ty"}', "a: a control character in a string must be escaped (line 1, column 8)"],
      ['{"a":"\\x41"}', "a: an invalid escape in a string (line 1, column 7)"],
      ['{"a":"\\u12"}', "a: an invalid escape in a string (line 1, column 7)"],
      ['{"a":"open', "a: a string is not closed (line 1, column 6)"],
      ['{"k\\ud800":1}', "a string is not well-formed Unicode (a lone surrogate) (line 1, column 2)"],
      ['["ok","\\udc00"]', "1: a string is not well-formed Unicode (a lone surrogate) (line 1, column 7)"],
      ['\n\n  {"a":\n   nul}', "a: expected a JSON value (line 4, column 4)"]
    ]
    for (const [text, expected] of cases) assert.strictEqual(refusal(text), expected, JSON.stringify(text))
    assert.strictEqual(parsed('"\\ud800"', { strict: false }), "\ud800")
  })

  it("bounds nesting without using the call stack: 100,000 levels are refused, not a stack overflow", () => {
    const deep = (levels: number) => "[".repeat(levels) + "]".repeat(levels)
    assert.strictEqual(Either.isRight(parseJson(deep(1000))), true, "1,000 levels are allowed")
    const error = refused(deep(100_000))
    assert.strictEqual(error.rule, "nested deeper than 1000 levels")
    assert.deepStrictEqual([error.path.length, error.line, error.column], [1000, 1, 1001])
    assert.match(
      describeJsonError(error),
      /^0\.0\.0\.0\.0\.0\.0\.0\.0\.0\.…986 more…\.0\.0\.0\.0: nested deeper/
    )
    assert.strictEqual(
      refusal('{"a":[[{}]]}', { maxDepth: 3 }),
      "a.0.0: nested deeper than 3 levels (line 1, column 8)"
    )
    assert.strictEqual(Either.isRight(parseJson(deep(100_000), { maxDepth: Number.POSITIVE_INFINITY })), true)
  })

  it("with elide, checks the syntax beyond maxDepth and leaves Elided in its place, listing the paths", () => {
    const result = parseJsonWith(
      `{"a":${"[".repeat(100_000)}${"]".repeat(100_000)},"b":{"c":{"d":[{"x":1,"x":2}]}},"e":[{}]}`,
      {
        maxDepth: 3,
        elide: true
      }
    )
    assert.isTrue(Either.isRight(result))
    if (Either.isLeft(result)) return
    const { value, elided } = result.right
    assert.deepStrictEqual(elided, [
      ["a", 0, 0],
      ["b", "c", "d"]
    ])
    assert.deepStrictEqual(JSON.stringify(value), '{"a":[[{}]],"b":{"c":{"d":{}}},"e":[{}]}')
    const a: unknown = Reflect.get(value ?? {}, "a")
    assert.strictEqual(Array.isArray(a) && Array.isArray(a[0]) ? a[0][0] : undefined, Elided)
    // A broken token beyond maxDepth is still refused, at the elided container's path.
    const broken = parseJsonWith('{"a":[[["x" 1]]]}', { maxDepth: 2, elide: true })
    assert.strictEqual(
      Either.isLeft(broken) ? describeJsonError(broken.left) : "",
      "a.0: expected ',' or ']' (line 1, column 13)"
    )
  })

  it("never quotes the input in an error, only the path, the rule and the position", () => {
    const secret = "sk-live-7Hq2ZrT9vX4pW1"
    const documents = [
      `{"token":"${secret}`,
      `{"token":"${secret}\u0001"}`,
      `{"token":"${secret}\\q"}`,
      `{"token":${secret}}`,
      `{"token":"x" ${secret}}`,
      `{"token":"x"} ${secret}`,
      `["${secret}", ${secret}]`,
      `{"token":"${secret}\\ud800"}`,
      `{"token":[9${secret}]}`,
      `{"token":"${secret}","token":"${secret}"}`
    ]
    for (const text of documents) {
      const message = refusal(text)
      for (let at = 0; at + 4 <= secret.length; at += 1)
        assert.notInclude(message, secret.slice(at, at + 4), `${message} quotes the input`)
    }
  })

  it("shows keys as names, and quotes and cuts a key that is not one", () => {
    assert.strictEqual(refusal('{"a b":{"x":1,"x":1}}'), '"a b".x: duplicate key (line 1, column 15)')
    const long = "k".repeat(100)
    assert.strictEqual(
      refusal(`{"${long}":[1,]}`),
      `"${"k".repeat(40)}…".1: expected a JSON value (line 1, column 108)`
    )
  })
})
