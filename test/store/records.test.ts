/** Stored records are read with our parser: a duplicate key is damage, and payload keys stay data. */
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { JsonObject } from "../../src/domain/Task.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { newRecord, payloadSha256, taskIdFor } from "../../src/domain/transitions.js"
import { decodeRecordText } from "../../src/store/records.js"
import { parseJsonField } from "../../src/domain/input.js"

const Key = new Uint8Array(32)

const payloadText = '{"prompt":"secret-prompt-9f2c","__proto__":{"admin":true}}'

const recordText = () => {
  const payload = Either.getOrThrow(
    Either.flatMap(parseJsonField("payload", payloadText), Schema.decodeUnknownEither(JsonObject))
  )
  const taskId = taskIdFor(Key, ClientRequestId.make("stored"))
  const record = newRecord({
    taskId,
    clientRequestId: ClientRequestId.make("stored"),
    payload,
    payloadSha256: payloadSha256({}),
    now: 0
  })
  return {
    taskId,
    text: JSON.stringify({ ...record, payload_sha256: payloadSha256(record.payload) }, null, 2)
  }
}

describe("decodeRecordText", () => {
  it("keeps a payload's __proto__ key as data, so its hash still matches", () => {
    const { taskId, text } = recordText()
    const decoded = decodeRecordText("tasks/x.json", text, taskId, Key)
    assert.isTrue(Either.isRight(decoded), Either.isLeft(decoded) ? decoded.left.message : "")
    if (Either.isLeft(decoded)) return
    assert.deepStrictEqual(Object.keys(decoded.right.payload), ["prompt", "__proto__"])
    assert.deepStrictEqual(Object.getOwnPropertyDescriptor(decoded.right.payload, "__proto__")?.value, {
      admin: true
    })
  })

  it("reports a record with a duplicate key as damaged, naming the path and not the value", () => {
    const { taskId, text } = recordText()
    const cases: ReadonlyArray<readonly [string, string]> = [
      [text.replace('"state": "queued",', '"state": "queued",\n  "state": "complete",'), "state"],
      [
        text.replace(
          '"prompt": "secret-prompt-9f2c",',
          '"prompt": "secret-prompt-9f2c",\n    "prompt": "other",'
        ),
        "payload.prompt"
      ]
    ]
    for (const [tampered, path] of cases) {
      const decoded = decodeRecordText("tasks/x.json", tampered, taskId, Key)
      assert.isTrue(Either.isLeft(decoded), `${path} accepted`)
      if (Either.isRight(decoded)) return
      assert.strictEqual(decoded.left._tag, "InvalidRecord")
      assert.match(
        decoded.left.reason,
        new RegExp(
          `^not valid JSON: ${path.replace(".", "\\.")}: duplicate key \\(line \\d+, column \\d+\\)$`
        )
      )
      assert.notInclude(decoded.left.message, "secret-prompt")
    }
  })

  it("reads numbers and strings a provider may have reported, which strict input would refuse", () => {
    const { taskId, text } = recordText()
    const decoded = decodeRecordText(
      "tasks/x.json",
      text.replace('"result": null', '"result": [1e+300, 9007199254740993, "\\ud800"]'),
      taskId,
      Key
    )
    assert.isTrue(Either.isRight(decoded), Either.isLeft(decoded) ? decoded.left.message : "")
    assert.deepStrictEqual(Either.isRight(decoded) ? decoded.right.result : null, [
      1e300,
      9007199254740992,
      "\ud800"
    ])
  })
})
