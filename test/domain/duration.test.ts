/** `since` as the CLI's `audit list --since` and the dashboard's audit route read it. */
import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import { parseDurationWithUnit, sinceMillisAt } from "../../src/domain/duration.js"

const now = Date.parse("2026-12-02T12:00:00.000Z")

describe("sinceMillisAt", () => {
  it("reads a duration as that long before now", () => {
    assert.deepStrictEqual(sinceMillisAt("24h", now, "since"), Either.right(now - 24 * 3_600_000))
    assert.deepStrictEqual(sinceMillisAt("90s", now, "since"), Either.right(now - 90_000))
  })

  it("reads an ISO date or date-time as that moment, whatever now is", () => {
    assert.deepStrictEqual(
      sinceMillisAt("2026-11-30", now, "since"),
      Either.right(Date.parse("2026-11-30T00:00:00.000Z"))
    )
    assert.deepStrictEqual(
      sinceMillisAt("2026-11-30T08:00:00Z", 0, "since"),
      Either.right(Date.parse("2026-11-30T08:00:00.000Z"))
    )
  })

  it("refuses text that is neither, naming the field it came from", () => {
    const refused = sinceMillisAt("yesterday", now, "--since")
    assert.isTrue(Either.isLeft(refused))
    if (Either.isLeft(refused)) {
      assert.strictEqual(refused.left._tag, "InvalidInput")
      assert.strictEqual(refused.left.field, "--since")
      assert.strictEqual(refused.left.reason, "not a date, time or duration")
    }
  })
})

describe("parseDurationWithUnit", () => {
  it("takes a duration that names its unit, and refuses a bare number, which would be seconds", () => {
    assert.deepStrictEqual(parseDurationWithUnit("30d"), Either.right(30 * 86_400_000))
    assert.deepStrictEqual(parseDurationWithUnit("90s"), Either.right(90_000))
    for (const bare of ["30", " 7 ", "1.5"])
      assert.deepStrictEqual(
        parseDurationWithUnit(bare),
        Either.left("must name its unit (e.g. 30d or 12h): a bare number would mean seconds")
      )
    assert.isTrue(Either.isLeft(parseDurationWithUnit("soon")))
  })
})
