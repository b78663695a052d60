/** Lines from an MCP client, read with our parser; a call's arguments reach the handler as sent. */
import { assert, describe, it } from "@effect/vitest"
import { CallToolRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Either } from "effect"
import { Elided } from "../../src/domain/json.js"
import { argumentsAsSent, decodeMessage } from "../../src/mcp/jsonRpcMessage.js"

const call = (args: string, id = "7") =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"submit","arguments":${args}}}`

const decoded = (line: string) => {
  const result = decodeMessage(Buffer.from(line, "utf8"))
  if (Either.isLeft(result)) return assert.fail(`refused: ${result.left.message}`)
  return result.right
}

const refused = (line: string | Buffer) => {
  const result = decodeMessage(typeof line === "string" ? Buffer.from(line, "utf8") : line)
  if (Either.isRight(result)) return assert.fail("accepted")
  return result.left
}

/** What our tools/call handler is given: the SDK's own parse, then the unwrapping. */
const handed = (line: string): unknown =>
  argumentsAsSent(CallToolRequestSchema.parse(decoded(line)).params.arguments)

describe("decodeMessage", () => {
  it("hands a call's arguments on exactly as sent, a top-level __proto__ key included", () => {
    const args = handed(call('{"__proto__":{"x":1},"client_request_id":"a","payload":{"__proto__":2}}'))
    assert.deepStrictEqual(Object.keys(args ?? {}), ["__proto__", "client_request_id", "payload"])
    assert.deepStrictEqual(Object.getOwnPropertyDescriptor(args, "__proto__")?.value, { x: 1 })
    assert.strictEqual(Object.getPrototypeOf(args), Object.prototype)
    // Without our transport, the SDK's parse drops the key: the reason for the wrapping.
    const bare: unknown = CallToolRequestSchema.parse(JSON.parse(call('{"__proto__":{"x":1},"a":1}'))).params
      .arguments
    assert.deepStrictEqual(Object.keys(bare ?? {}), ["a"])
    assert.deepStrictEqual(handed(call('{"a":1}')), { a: 1 })
    assert.strictEqual(argumentsAsSent(undefined), undefined)
  })

  it("refuses duplicate keys, big integers and invalid UTF-8 as parse errors, with the id when it can", () => {
    assert.deepStrictEqual(refused(call('{"payload":{"a":1,"a":2}}')), {
      id: 7,
      code: -32700,
      message: "Parse error: params.arguments.payload.a: duplicate key (line 1, column 103)"
    })
    assert.deepStrictEqual(
      refused(
        `{"method":"tools/call","params":{"arguments":{"n":9007199254740993}},"jsonrpc":"2.0","id":"late"}`
      ),
      {
        id: "late",
        code: -32700,
        message:
          "Parse error: params.arguments.n: a number beyond ±(2^53−1) cannot be held exactly (line 1, column 51)"
      }
    )
    const invalid = Buffer.concat([
      Buffer.from('{"jsonrpc":"2.0","id":3,"params":"'),
      Buffer.from([0xff]),
      Buffer.from('"}')
    ])
    assert.deepStrictEqual(refused(invalid), {
      id: 3,
      code: -32700,
      message: "Parse error: the message is not valid UTF-8"
    })
    assert.strictEqual(refused("{not json").id, null)
  })

  it("elides what is too deep in a call's arguments, for the pipeline to refuse; anywhere else it is refused", () => {
    const deep = `${"[".repeat(2200)}${"]".repeat(2200)}`
    const args = handed(call(`{"payload":{"a":${deep}}}`))
    let inner: unknown = Reflect.get(Reflect.get(args ?? {}, "payload") ?? {}, "a")
    let levels = 0
    while (Array.isArray(inner)) {
      inner = inner[0]
      levels += 1
    }
    assert.strictEqual(inner, Elided)
    assert.strictEqual(levels, 1000 - 4, "built down to the message's depth limit (payload.a is level 5)")
    assert.deepStrictEqual(
      refused(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":${deep}}}}`),
      {
        id: 1,
        code: -32600,
        message:
          "Invalid Request: params._meta.x.0.0.0.0.0.0.0.…986 more….0.0.0.0: nested deeper than 1000 levels"
      }
    )
    assert.strictEqual(
      refused(`{"jsonrpc":"2.0","id":1,"method":"other","params":{"arguments":${deep}}}`).code,
      -32600
    )
  })

  it("refuses JSON that is not a JSON-RPC message", () => {
    assert.deepStrictEqual(refused('{"jsonrpc":"1.0","id":4,"method":"x"}'), {
      id: 4,
      code: -32600,
      message: "Invalid Request: not a JSON-RPC 2.0 message"
    })
    assert.strictEqual(refused("[1,2]").id, null)
  })
})
