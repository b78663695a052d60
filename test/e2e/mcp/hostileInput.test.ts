/**
 * Hostile input to the built `relaykeep-tasks`, over real stdio, written by hand so that the
 * bytes are exactly the hostile ones (duplicate keys, big integers, invalid UTF-8 cannot be
 * written with JSON.stringify). After every case the same server answers a normal call, stdout
 * carries JSON-RPC only, and the server still exits 0 when stdin closes. What a client sees for
 * each case: docs/mcp.md#messages-and-limits.
 */
import { assert, describe, it } from "@effect/vitest"
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js"
import { Option, Predicate, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Receipt } from "../../../src/domain/Task.js"
import { AuditEntry } from "../../../src/domain/audit.js"
import { MaxAuditedArgumentBytes, MaxMessageBytes } from "../../../src/mcp/limits.js"
import { jcsSha256 } from "../../support/jcs.js"
import type { RawServer } from "../../support/mcpProcess.js"
import { initializedNotification, initializeRequest, JsonRpcLine } from "../../support/mcpProcess.js"
import type { CallResult as CallResultType } from "../../support/mcpStdio.js"
import { CallResult, errorResult, okResult, useMcpTest } from "../../support/mcpStdio.js"

const mcp = useMcpTest()

const decodeLine = Schema.decodeUnknownOption(JsonRpcLine, { onExcessProperty: "error" })
const decodeCallResult = Schema.decodeUnknownSync(CallResult)
const decodeAuditLine = Schema.decodeUnknownSync(Schema.parseJson(AuditEntry))
const ListPage = Schema.Struct({
  tasks: Schema.Array(Schema.Unknown),
  next_cursor: Schema.NullOr(Schema.String)
})

type Reply =
  | { readonly _tag: "Result"; readonly result: CallResultType }
  | { readonly _tag: "Error"; readonly code: number; readonly message: string }

/** Every stdout line is a JSON-RPC message (and nothing else is on stdout). */
const assertJsonRpcOnly = (lines: ReadonlyArray<string>) => {
  for (const line of lines)
    assert.isTrue(
      Option.isSome(decodeLine(line)),
      `stdout carries a line that is not JSON-RPC: ${line.slice(0, 200)}`
    )
}

/** The text of a tools/call with `args` written as given. */
const callText = (id: number, tool: string, args: string) =>
  `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"${tool}","arguments":${args}}}`

/** A started session on `root`, driven by hand; ids count up from 10. */
const open = async (root: string) => {
  const server: RawServer = mcp.rawTasks(root)
  server.send(initializeRequest(1))
  await server.response(1)
  server.send(initializedNotification)
  let nextId = 10

  /** The answer to the line with `id`, once it has come. */
  const replyTo = async (id: number): Promise<Reply> => {
    await server.response(id)
    for (const line of server.lines()) {
      const message = decodeLine(line)
      if (Option.isNone(message) || "method" in message.value || message.value.id !== id) continue
      const value = message.value
      return "error" in value
        ? { _tag: "Error", code: value.error.code, message: value.error.message }
        : { _tag: "Result", result: decodeCallResult(value.result) }
    }
    return assert.fail(`no answer to ${id}: the server has ended`)
  }

  /** Send `line` (built with the id it is given) and wait for its answer; `sent` is the line. */
  const exchange = async (
    line: (id: number) => string | Buffer
  ): Promise<Reply & { readonly sent: Buffer }> => {
    const id = nextId++
    const sent = Buffer.from(line(id))
    await server.sendLine(sent)
    return { ...(await replyTo(id)), sent }
  }

  const call = (tool: string, args: string) => exchange((id) => callText(id, tool, args))

  const resultOf = (reply: Reply): CallResultType => {
    assert.strictEqual(reply._tag, "Result", reply._tag === "Error" ? reply.message : "")
    return reply._tag === "Result" ? reply.result : { content: [] }
  }

  /** A JSON-RPC error answer (not a tool result); returns its message. */
  const rpcError = (reply: Reply, code: number): string => {
    assert.strictEqual(reply._tag, "Error", "a JSON-RPC error, not a tool result")
    if (reply._tag !== "Error") return ""
    assert.strictEqual(reply.code, code, reply.message)
    return reply.message
  }

  /** The server is alive: a normal call after the hostile one is answered as usual. */
  const stillAnswers = async () => {
    okResult(ListPage, resultOf(await call("list", "{}")))
  }

  /** Close stdin: the server exits 0 by itself, and everything it printed was JSON-RPC. */
  const close = async () => {
    server.closeStdin()
    const exit = await server.exited
    assert.strictEqual(exit.signal, null, `killed by ${exit.signal}; stderr: ${exit.stderr}`)
    assert.strictEqual(exit.code, 0, `exit code; stderr: ${exit.stderr}`)
    assertJsonRpcOnly(exit.stdoutLines)
    return exit
  }

  return { server, call, exchange, resultOf, rpcError, stillAnswers, close }
}

const auditDir = (root: string) => path.join(root, "audit")
const auditNames = (root: string) =>
  fs.existsSync(auditDir(root))
    ? fs.readdirSync(auditDir(root)).filter((name) => name.endsWith(".jsonl"))
    : []
const auditEntries = (root: string) =>
  auditNames(root)
    .flatMap((name) => fs.readFileSync(path.join(auditDir(root), name), "utf8").split("\n"))
    .filter((line) => line !== "")
    .map((line) => ({ line, entry: decodeAuditLine(line) }))
const auditBytes = (root: string) =>
  auditNames(root).reduce((total, name) => total + fs.statSync(path.join(auditDir(root), name)).size, 0)

/**
 * Every file of the root but the audit log and the writer markers, by content: what a refused call
 * must not change. (A writer marker says a store instance that writes records is alive; the
 * server's goes when it exits, refused calls or not.)
 */
const storedState = (root: string): Readonly<Record<string, string>> => {
  const found: Record<string, string> = {}
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name)
      const relative = path.relative(root, full)
      if (relative === "audit" || relative === "writers") continue
      if (entry.isDirectory()) {
        found[`${relative}/`] = "dir"
        walk(full)
      } else if (entry.isFile()) found[relative] = fs.readFileSync(full).toString("base64")
    }
  }
  walk(root)
  return found
}
/** The files under tasks/ (the directory itself exists from the server's start). */
const taskFiles = (root: string) =>
  Object.keys(storedState(root)).filter((name) => name.startsWith("tasks/") && !name.endsWith("/"))

const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`

describe("relaykeep-tasks against hostile input, over real stdio", { timeout: 120_000 }, () => {
  it("a message over the line limit is answered with a JSON-RPC error naming the limit, and the next call works", async () => {
    const root = mcp.tempDir()
    const session = await open(root)
    const text = "x".repeat(10 * 1024 * 1024)
    // The SDK's client writes the id last; this one writes it first. Both are found.
    const idFirst = await session.exchange((id) =>
      callText(id, "submit", `{"client_request_id":"huge","payload":{"text":"${text}"}}`)
    )
    assert.strictEqual(
      session.rpcError(idFirst, ErrorCode.InvalidRequest),
      `Invalid Request: the message is ${idFirst.sent.length} bytes; the limit is ${MaxMessageBytes} bytes`
    )
    await session.stillAnswers()
    const idLast = await session.exchange(
      (id) =>
        `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"submit","arguments":{"client_request_id":"huge","payload":{"text":"${text}"}}},"id":${id}}`
    )
    assert.include(
      session.rpcError(idLast, ErrorCode.InvalidRequest),
      `the limit is ${MaxMessageBytes} bytes`
    )
    await session.stillAnswers()
    // One byte over the limit is refused; a line at the limit is read (and refused for its content).
    const padded = (id: number, bytes: number) => {
      const head = callText(id, "list", `{"limit":1}`)
      return `${head.slice(0, -1)}${" ".repeat(bytes - head.length)}}`
    }
    const over = await session.exchange((id) => padded(id, MaxMessageBytes + 1))
    assert.include(session.rpcError(over, ErrorCode.InvalidRequest), `is ${MaxMessageBytes + 1} bytes`)
    const atLimit = await session.exchange((id) => padded(id, MaxMessageBytes))
    okResult(ListPage, session.resultOf(atLimit))
    const exit = await session.close()
    assert.notInclude(exit.stderr, "x".repeat(64), "the message is not echoed to stderr")
    assert.isFalse(
      auditEntries(root).some(({ line }) => line.includes("huge")),
      "a message never read is not a call"
    )
    assert.deepStrictEqual(taskFiles(root), [], "nothing stored")
  })

  it("arguments nested 2,200 deep: isError InvalidArguments, audited in a small entry that says what was cut", async () => {
    const root = mcp.tempDir()
    const session = await open(root)
    const deep = await session.call("submit", `{"client_request_id":"deep","payload":{"a":${nested(2200)}}}`)
    assert.strictEqual(
      errorResult(session.resultOf(deep), "InvalidArguments"),
      "arguments: nested deeper than 64 levels"
    )
    await session.stillAnswers()
    // Deep in every way the grammar allows: objects, arrays, both, in a tool that takes none.
    const objects = `${'{"k":'.repeat(2200)}1${"}".repeat(2200)}`
    const deepObjects = await session.call(
      "submit",
      `{"client_request_id":"deep-objects","payload":${objects}}`
    )
    assert.include(
      errorResult(session.resultOf(deepObjects), "InvalidArguments"),
      "nested deeper than 64 levels"
    )
    const deepList = await session.call("list", `{"state":${nested(2200)}}`)
    assert.include(
      errorResult(session.resultOf(deepList), "InvalidArguments"),
      "nested deeper than 64 levels"
    )
    await session.stillAnswers()
    await session.close()

    const refused = auditEntries(root).filter(({ entry }) => entry.status === "invalid")
    assert.deepStrictEqual(
      refused.map(({ entry }) => [entry.tool, entry.error?.tag]),
      [
        ["submit", "InvalidArguments"],
        ["submit", "InvalidArguments"],
        ["list", "InvalidArguments"]
      ]
    )
    for (const { line, entry } of refused) {
      assert.isBelow(Buffer.byteLength(line), 2 * MaxAuditedArgumentBytes, "a small entry")
      assert.strictEqual(entry.arguments_truncated?.original_bytes, null)
      assert.include(entry.arguments_truncated?.reason ?? "", "nested deeper than 64 levels, cut there")
      assert.include(line, "[cut: nested deeper than 64 levels]")
    }
    assert.include(refused[0]?.line ?? "", '"client_request_id":"deep"', "what was not cut is kept")
    assert.deepStrictEqual(taskFiles(root), [], "nothing stored")
  })

  it("five rejected 3 MB payloads: five errors, and the audit log grows by a few KiB, each entry saying what was cut", async () => {
    const root = mcp.tempDir()
    const session = await open(root)
    const big = "y".repeat(3 * 1024 * 1024)
    for (let index = 0; index < 5; index += 1) {
      const reply = await session.call(
        "submit",
        `{"client_request_id":"big-${index}","payload":{"text":"${big}","n":${index}}}`
      )
      assert.match(
        errorResult(session.resultOf(reply), "InvalidArguments"),
        /^payload: is \d+ bytes; the limit is 1048576 bytes$/
      )
    }
    await session.stillAnswers()
    await session.close()

    const entries = auditEntries(root).filter(({ entry }) => entry.tool === "submit")
    assert.strictEqual(entries.length, 5)
    for (const { line, entry } of entries) {
      assert.isAtMost(Buffer.byteLength(line), MaxAuditedArgumentBytes + 1024, "one entry")
      assert.strictEqual(entry.status, "invalid")
      assert.isAbove(entry.arguments_truncated?.original_bytes ?? 0, big.length)
      assert.include(entry.arguments_truncated?.reason ?? "", "shortened")
      assert.include(line, "characters]", "the cut string says how much was cut")
    }
    assert.isBelow(auditBytes(root), 200 * 1024, "the audit log holds far less than the 15 MB refused")
    assert.deepStrictEqual(taskFiles(root), [], "nothing stored")
  })

  it("duplicate keys, big integers, lone surrogates, invalid UTF-8, a top-level __proto__: refused naming the field, nothing stored", async () => {
    const root = mcp.tempDir()
    const session = await open(root)
    const kept = session.resultOf(
      await session.call("submit", `{"client_request_id":"kept","payload":{"a":1}}`)
    )
    okResult(Receipt, kept)
    const before = storedState(root)

    // Refused while the line is read: a JSON-RPC parse error with the path, the rule and the
    // column of the token at fault (its last occurrence in the line), and nothing of the value.
    const parseErrors: ReadonlyArray<readonly [string, string, string, string]> = [
      [
        `{"client_request_id":"kept","client_request_id":"other","payload":{"a":2}}`,
        "params.arguments.client_request_id",
        "duplicate key",
        '"client_request_id"'
      ],
      [
        `{"client_request_id":"dup","payload":{"a":1,"b":{"c":1,"c":2}}}`,
        "params.arguments.payload.b.c",
        "duplicate key",
        '"c"'
      ],
      [
        `{"client_request_id":"big-int","payload":{"n":9007199254740993}}`,
        "params.arguments.payload.n",
        "a number beyond ±(2^53−1) cannot be held exactly",
        "9007199254740993"
      ],
      [
        `{"client_request_id":"big-exp","payload":{"n":[1,-1e400]}}`,
        "params.arguments.payload.n.1",
        "a number beyond ±(2^53−1) cannot be held exactly",
        "-1e400"
      ],
      [
        String.raw`{"client_request_id":"surrogate","payload":{"s":"\ud800"}}`,
        "params.arguments.payload.s",
        "a string is not well-formed Unicode (a lone surrogate)",
        String.raw`"\ud800"`
      ]
    ]
    for (const [args, field, rule, token] of parseErrors) {
      const reply = await session.call("submit", args)
      const column = reply.sent.lastIndexOf(token) + 1
      assert.strictEqual(
        session.rpcError(reply, ErrorCode.ParseError),
        `Parse error: ${field}: ${rule} (line 1, column ${column})`,
        args
      )
      await session.stillAnswers()
    }
    const notUtf8 = await session.exchange((id) =>
      Buffer.concat([
        Buffer.from(callText(id, "submit", `{"client_request_id":"latin1","payload":{"s":"caf`).slice(0, -2)),
        Buffer.from([0xe9]),
        Buffer.from('"}}}}')
      ])
    )
    assert.strictEqual(
      session.rpcError(notUtf8, ErrorCode.ParseError),
      "Parse error: the message is not valid UTF-8"
    )
    await session.stillAnswers()

    // Refused by the tool: a `__proto__` key beside the arguments is an unexpected argument.
    const proto = await session.call(
      "submit",
      `{"client_request_id":"proto","payload":{"a":1},"__proto__":{"x":1}}`
    )
    assert.strictEqual(errorResult(session.resultOf(proto), "InvalidArguments"), "__proto__: is unexpected")
    await session.stillAnswers()
    await session.close()

    assert.deepStrictEqual(storedState(root), before, "the root's tasks are unchanged")
    const audited = auditEntries(root).filter(({ entry }) => entry.tool === "submit")
    assert.deepStrictEqual(
      audited.map(({ entry }) => entry.status),
      ["ok", "invalid"],
      "a line that is not read is not a call; a refused call is audited"
    )
  })

  it("a __proto__ key inside the payload is data: three payloads, three receipts, each the RFC 8785 hash as sent", async () => {
    const root = mcp.tempDir()
    const session = await open(root)
    const payloads = [
      `{"a":1}`,
      `{"a":1,"__proto__":{}}`,
      `{"a":1,"__proto__":{"admin":true}}`,
      `{"a":1,"constructor":{"prototype":{"admin":true}}}`
    ]
    const receipts = []
    for (const [index, payload] of payloads.entries()) {
      const reply = await session.call(
        "submit",
        `{"client_request_id":"proto-${index}","payload":${payload}}`
      )
      receipts.push(okResult(Receipt, session.resultOf(reply)))
    }
    // JSON.parse keeps `__proto__` as an own key too, so the independent hash sees what was sent.
    assert.deepStrictEqual(
      receipts.map((receipt) => receipt.payload_sha256),
      payloads.map((payload) => jcsSha256(JSON.parse(payload)))
    )
    assert.strictEqual(new Set(receipts.map((receipt) => receipt.payload_sha256)).size, payloads.length)
    // Under one id, a payload that differs only in its __proto__ member is a conflict.
    for (const payload of payloads.slice(1, 3)) {
      const again = await session.call("submit", `{"client_request_id":"proto-0","payload":${payload}}`)
      // The message names the field and the task, not the request id (it is the caller's input).
      const message = errorResult(session.resultOf(again), "ConflictError")
      assert.match(message, /^client_request_id: already task [0-9a-f]{64} with a different payload/)
      assert.notInclude(message, "proto-0")
    }
    const same = await session.call("submit", `{"client_request_id":"proto-2","payload":${payloads[2]}}`)
    assert.deepStrictEqual(
      okResult(Receipt, session.resultOf(same)),
      receipts[2],
      "the same payload: the same receipt"
    )
    await session.close()
    // On disk, each record holds its payload as sent, `__proto__` member and all.
    assert.strictEqual(taskFiles(root).length, payloads.length)
    for (const [index, receipt] of receipts.entries()) {
      const record: unknown = JSON.parse(
        fs.readFileSync(path.join(root, "tasks", `${receipt.task_id}.json`), "utf8")
      )
      const payload = Predicate.isRecord(record) ? record["payload"] : undefined
      assert.strictEqual(jcsSha256(payload), receipt.payload_sha256, payloads[index])
    }
  })
})
