/**
 * The submit form checks what `relaykeep submit` checks: on random request ids and random JSON
 * texts, the page's checks (src/dashboard/page/validate.ts) accept exactly what the domain's
 * schemas and `preparePayload` accept.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, FastCheck as fc, Schema } from "effect"
import { checkPayload, checkRequestId, MaxPayloadBytes } from "../../src/dashboard/page/validate.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { parseJsonField } from "../../src/domain/input.js"
import { parseJson } from "../../src/domain/json.js"
import { DefaultMaxPayloadBytes, preparePayload } from "../../src/domain/submission.js"
import { JsonObject } from "../../src/domain/Task.js"

const isRequestId = Schema.is(ClientRequestId)

/** What the CLI does with payload text: parse, decode as an object, check its canonical size. */
const domainAccepts = (text: string): boolean =>
  Either.match(parseJsonField("payload", text), {
    onLeft: () => false,
    onRight: (json) =>
      Either.match(Schema.decodeUnknownEither(JsonObject)(json), {
        onLeft: () => false,
        onRight: (payload) => Either.isRight(preparePayload(payload, DefaultMaxPayloadBytes))
      })
  })

const Seed = 20261130

describe("the submit form's checks", () => {
  it("uses the store's payload limit", () => {
    assert.strictEqual(MaxPayloadBytes, DefaultMaxPayloadBytes)
  })

  it.prop(
    "accept a non-empty request id exactly when ClientRequestId does",
    {
      id: fc.oneof(fc.string({ minLength: 1, maxLength: 210, unit: "binary" }), fc.string({ minLength: 1 }))
    },
    ({ id }) => {
      assert.strictEqual(checkRequestId(id).ok, isRequestId(id), JSON.stringify(id))
    },
    { fastCheck: { numRuns: 500, seed: Seed } }
  )

  it.prop(
    "accept payload text exactly when submit does",
    {
      text: fc.oneof(
        fc.json(),
        fc.string(),
        fc.json().map((json) => json.slice(0, -1))
      )
    },
    ({ text }) => {
      // The page stays free of the server's parser (it would grow app.js sixteenfold), so text
      // that only the strict parser refuses (a duplicate key, an inexact number, a lone
      // surrogate) passes the form and is refused by the API, whose answer the form shows.
      const strictOnly = Either.isRight(Either.try(() => JSON.parse(text))) && Either.isLeft(parseJson(text))
      if (strictOnly) assert.isFalse(domainAccepts(text), text)
      else assert.strictEqual(checkPayload(text).ok, domainAccepts(text), text)
    },
    { fastCheck: { numRuns: 500, seed: Seed } }
  )

  it("refuses arrays, null, scalars, broken JSON and payloads over the limit, naming the field", () => {
    const big = JSON.stringify({ text: "x".repeat(DefaultMaxPayloadBytes) })
    for (const text of ["[1]", "null", "1", '"text"', "{", big]) {
      const checked = checkPayload(text)
      assert.isFalse(checked.ok, text.slice(0, 20))
      assert.isFalse(domainAccepts(text), text.slice(0, 20))
      if (!checked.ok) assert.match(checked.reason, /^payload: /)
    }
    assert.isTrue(checkPayload('{"prompt":"hello"}').ok)
    assert.deepStrictEqual(checkRequestId(""), { ok: true, value: null })
  })
})
