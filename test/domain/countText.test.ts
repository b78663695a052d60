/** `countText` writes a count as `toLocaleString("en")` would, without loading the locale data. */
import { assert, describe, it } from "@effect/vitest"
import { FastCheck } from "effect"
import { countText } from "../../src/domain/memory.js"

describe("countText", () => {
  it("groups the digits of a count by threes, as English does", () => {
    assert.strictEqual(countText(0), "0")
    assert.strictEqual(countText(999), "999")
    assert.strictEqual(countText(1000), "1,000")
    assert.strictEqual(countText(1_048_576), "1,048,576")
    assert.strictEqual(countText(-250_000), "-250,000")
  })

  it('agrees with toLocaleString("en") on every safe integer', () => {
    // Short and long counts alike; `+ 0` turns -0 (which English writes "-0") into 0.
    const counts = FastCheck.oneof(
      FastCheck.maxSafeInteger(),
      FastCheck.integer({ min: -99_999, max: 99_999 })
    )
    FastCheck.assert(
      FastCheck.property(
        counts.map((n) => n + 0),
        (n) => countText(n) === n.toLocaleString("en")
      ),
      { numRuns: 2000 }
    )
  })
})
