/**
 * Payloads are stored exactly as sent, in every TaskStore: parsed by our parser, a payload keeps
 * `__proto__`, `constructor` and `prototype` as data through decoding, storage and read-back,
 * and its receipt carries the RFC 8785 hash of what was sent, computed here independently.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect, Either } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import { decodeField, parseJsonField } from "../../src/domain/input.js"
import { JsonObject } from "../../src/domain/Task.js"
import { sha256Hex } from "../../src/domain/canonical.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { jcs, jcsSha256 } from "../support/jcs.js"

/** The payload as the CLI and the dashboard take it: our parser, then the payload schema. */
const payloadOf = (text: string) =>
  Effect.flatMap(parseJsonField("payload", text), decodeField("payload", JsonObject))

/** Keys in UTF-16 order are \r 1 __proto__ b constructor n \u0080 ö € 😀 דּ; numbers from RFC 8785. */
const Sent = String.raw`{"b":{"__proto__":{"polluted":true}},"__proto__":[1,"x"],"constructor":{"prototype":null},
  "\u20ac":"euro","\r":"cr","1":"one","\ud83d\ude00":"emoji","\u0080":"c1","\u00f6":"o","\ufb33":"dalet",
  "n":[333333333.33333329,1E15,4.50,2e-3,0.000001,-0,9007199254740991,5e-324,-1.0]}`
/** Its canonical form, written out by hand. */
const Canonical =
  '{"\\r":"cr","1":"one","__proto__":[1,"x"],"b":{"__proto__":{"polluted":true}},"constructor":{"prototype":null},' +
  '"n":[333333333.3333333,1000000000000000,4.5,0.002,0.000001,0,9007199254740991,5e-324,-1],' +
  '"\u0080":"c1","\u00f6":"o","\u20ac":"euro","\ud83d\ude00":"emoji","\ufb33":"dalet"}'

export const exactPayloadContract = (
  name: string,
  makeStore: () => Effect.Effect<TaskStoreShape, unknown, Scope.Scope>
) =>
  describe(`payloads stored exactly as sent: ${name}`, () => {
    it.scoped("the receipt's hash is the RFC 8785 hash of the payload as sent, __proto__ included", () =>
      Effect.gen(function* () {
        const store = yield* makeStore()
        const payload = yield* payloadOf(Sent)
        assert.strictEqual(
          jcs(payload),
          Canonical,
          "the independent canonicalizer agrees with the hand-written form"
        )
        const receipt = yield* store.submit({ clientRequestId: ClientRequestId.make("exact"), payload })
        assert.strictEqual(receipt.payload_sha256, sha256Hex(Canonical))
        assert.strictEqual(receipt.payload_sha256, jcsSha256(payload))
        // Read back from the store: the same members, own data, and the same hash.
        const stored = (yield* store.record(receipt.task_id)).payload
        assert.deepStrictEqual(Object.keys(stored).sort(), Object.keys(payload).sort())
        assert.strictEqual(Object.getPrototypeOf(stored), Object.prototype)
        assert.deepStrictEqual(Object.getOwnPropertyDescriptor(stored, "__proto__")?.value, [1, "x"])
        assert.strictEqual(jcs(stored), Canonical)
        const view = yield* store.read(receipt.task_id, receipt.payload_sha256)
        assert.strictEqual(view.state, "queued")
      })
    )

    it.scoped("three payloads that differ only in a __proto__ key are three payloads", () =>
      Effect.gen(function* () {
        const store = yield* makeStore()
        const texts = ['{"a":1}', '{"a":1,"__proto__":{}}', '{"a":1,"__proto__":{"admin":true}}']
        const payloads = yield* Effect.forEach(texts, payloadOf)
        const receipts = yield* Effect.forEach(payloads, (payload, index) =>
          store.submit({ clientRequestId: ClientRequestId.make(`proto-${index}`), payload })
        )
        const hashes = receipts.map((receipt) => receipt.payload_sha256)
        assert.strictEqual(new Set(hashes).size, 3, "three hashes")
        assert.deepStrictEqual(hashes, payloads.map(jcsSha256))
        // Under one request id, the other two are conflicts, and the first is still the task.
        const first = ClientRequestId.make("proto-one-id")
        const [original, ...others] = payloads
        const receipt = yield* store.submit({ clientRequestId: first, payload: original ?? {} })
        for (const payload of others) {
          const again = yield* Effect.either(store.submit({ clientRequestId: first, payload }))
          assert.isTrue(Either.isLeft(again) && again.left._tag === "ConflictError", "a conflict")
        }
        assert.strictEqual(
          (yield* store.read(receipt.task_id, receipt.payload_sha256)).payload_sha256,
          hashes[0]
        )
      })
    )

    it.scoped("a payload with duplicate keys or an integer beyond 2^53 never reaches the store", () =>
      Effect.gen(function* () {
        const store = yield* makeStore()
        const duplicate = yield* Effect.flip(payloadOf('{"client":{"a":1,"a":2}}'))
        assert.strictEqual(
          duplicate.message,
          "payload: not valid JSON: client.a: duplicate key (line 1, column 18)"
        )
        const big = yield* Effect.flip(payloadOf('{"n":9007199254740993}'))
        assert.include(big.message, "payload: not valid JSON: n: a number beyond ±(2^53−1)")
        assert.strictEqual((yield* store.list({})).tasks.length, 0)
      })
    )
  })
