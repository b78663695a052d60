import { assert, describe, it } from "@effect/vitest"
import { canonicalJson, sha256Hex } from "../../src/domain/canonical.js"
import { payloadSha256 } from "../../src/domain/transitions.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { preparePayload } from "../../src/domain/submission.js"
import { Either, Schema } from "effect"

describe("RFC 8785 canonical JSON", () => {
  it("matches the RFC's worked example", () => {
    const input: unknown = JSON.parse(
      String.raw`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`
    )
    assert.strictEqual(
      canonicalJson(input),
      String.raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
    )
  })

  it("sorts keys by UTF-16 code units, at every depth", () => {
    const input = { "\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\ud83d\ude00": 5, "\u0080": 6, "\u00f6": 7 }
    assert.strictEqual(
      canonicalJson({ outer: [input], a: { z: 1, y: 2 } }),
      `{"a":{"y":2,"z":1},"outer":[{"\\r":2,"1":4,"\u0080":6,"ö":7,"€":1,"😀":5,"דּ":3}]}`
    )
  })

  it("writes numbers in their shortest round-trip form", () => {
    assert.strictEqual(canonicalJson([-0, 1e21, 1e-7, 0.1, 100, 1.5e300]), "[0,1e+21,1e-7,0.1,100,1.5e+300]")
  })

  it("rejects what JSON cannot carry", () => {
    assert.throws(() => canonicalJson({ n: Number.POSITIVE_INFINITY }))
    assert.throws(() => canonicalJson({ f: () => 1 }))
  })

  it("refuses unpaired surrogates, which hashing would fold into one character", () => {
    assert.throws(() => canonicalJson({ text: "a\uD800" }), /well-formed/)
    assert.throws(() => canonicalJson({ ["k\uDC00"]: 1 }), /well-formed/)
    assert.strictEqual(canonicalJson({ emoji: "\uD83D\uDE00" }), '{"emoji":"😀"}')
    assert.isFalse(Schema.is(ClientRequestId)("a\uD800"))
    assert.isTrue(Schema.is(ClientRequestId)("a\uD83D\uDE00"))
    assert.isTrue(Either.isLeft(preparePayload({ text: "\uDFFF" }, 1024)))
  })

  it("gives one payload hash whatever the key order or whitespace", () => {
    const a = payloadSha256(JSON.parse('{"b": [1, {"y": 1, "x": 2}], "a": "é"}'))
    const b = payloadSha256(JSON.parse('{"a":"é","b":[1,{"x":2,"y":1}]}'))
    assert.strictEqual(a, b)
    assert.strictEqual(a, sha256Hex('{"a":"é","b":[1,{"x":2,"y":1}]}'))
  })
})
