/** The stdio framing: lines across chunks, and a line over the limit skipped, not held. */
import { assert, describe, it } from "@effect/vitest"
import type { Framed } from "../../src/mcp/lineFraming.js"
import { makeLineSplitter, recoverRequestId } from "../../src/mcp/lineFraming.js"

const lines = (framed: ReadonlyArray<Framed>) =>
  framed.map((line) =>
    line._tag === "Line" ? line.bytes.toString("utf8") : { bytes: line.bytes, id: line.id }
  )

describe("makeLineSplitter", () => {
  it("joins a line split over chunks, splits chunks holding several, and keeps a partial line for later", () => {
    const split = makeLineSplitter(100)
    assert.deepStrictEqual(lines(split(Buffer.from('{"a":'))), [])
    assert.deepStrictEqual(lines(split(Buffer.from('1}\n{"b":2}\n\n{"c"'))), ['{"a":1}', '{"b":2}', ""])
    assert.deepStrictEqual(lines(split(Buffer.from(":3}\n"))), ['{"c":3}'])
  })

  it("skips a line over the limit, counting its bytes and reading its id from either end, then goes on", () => {
    const split = makeLineSplitter(64)
    const head = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"'
    assert.deepStrictEqual(lines(split(Buffer.from(head))), [])
    for (let chunk = 0; chunk < 100; chunk += 1)
      assert.deepStrictEqual(lines(split(Buffer.alloc(1000, 0x61))), [])
    assert.deepStrictEqual(lines(split(Buffer.from('"}}\n{"ok":1}\n'))), [
      { bytes: head.length + 100_000 + 3, id: 7 },
      '{"ok":1}'
    ])
    // The SDK's client writes the id last.
    const last = `{"method":"tools/call","params":{"x":"${"b".repeat(200)}"},"jsonrpc":"2.0","id":"req-9"}\n`
    assert.deepStrictEqual(lines(split(Buffer.from(last))), [{ bytes: last.length - 1, id: "req-9" }])
    const none = `{"params":{"id":3,"x":"${"c".repeat(200)}"}}\n`
    assert.deepStrictEqual(lines(split(Buffer.from(none))), [{ bytes: none.length - 1, id: null }])
  })

  it("allows a line of exactly the limit", () => {
    const split = makeLineSplitter(10)
    assert.deepStrictEqual(lines(split(Buffer.from("0123456789\n01234567890\n"))), [
      "0123456789",
      { bytes: 11, id: null }
    ])
  })
})

describe("recoverRequestId", () => {
  it("reads an id that is plainly at the top level, and nothing else", () => {
    assert.strictEqual(recoverRequestId('{"jsonrpc":"2.0","id":12,"method":"x"', ""), 12)
    assert.strictEqual(recoverRequestId(' { "id" : "a-1" , ', ""), "a-1")
    assert.strictEqual(recoverRequestId("", ',"jsonrpc":"2.0","id":-4}'), -4)
    assert.strictEqual(recoverRequestId("", ',"jsonrpc":"2.0","id":5}\r'), 5)
    // Nested, escaped, too big, or not plainly at either end: no id.
    assert.isNull(recoverRequestId('{"params":{"id":1}', ',"a":{"id":2}}'))
    assert.isNull(recoverRequestId('{"id":"a\\"b"', ""))
    assert.isNull(recoverRequestId('{"id":99999999999999999', ""))
    assert.isNull(recoverRequestId('{"id":1.5', ""))
    assert.isNull(recoverRequestId("", '"x":"y","id":3} trailing'))
  })
})
