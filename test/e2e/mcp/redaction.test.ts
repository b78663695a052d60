/**
 * Secrets sent to the built `relaykeep-tasks` (and `relaykeep-memory`) over real stdio, with the
 * SDK's own client: under sensitive keys, in header pairs of both shapes, in URL user-info, in
 * JSON text that does not parse (as an argument, and as a whole line written by hand). None may
 * come back on stdout, reach stderr, or be written to `<root>/audit/*.jsonl`. Run `npm run build`
 * first.
 */
import { assert, describe, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import type { Session } from "../../support/mcpStdio.js"
import { call, useMcpTest } from "../../support/mcpStdio.js"
import { initializedNotification, initializeRequest, writeLines } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

/** A distinct secret in no known token format: finding it anywhere is a leak. */
const secret = (): string => `zQ9${randomBytes(16).toString("hex")}`

/** Every JSON-RPC message the client received from the server, as text. */
const recordReceived = (session: Session): Array<string> => {
  const seen: Array<string> = []
  const transport = session.client.transport
  if (transport === undefined) return assert.fail("the client is connected")
  const deliver = transport.onmessage
  transport.onmessage = (message, extra) => {
    seen.push(JSON.stringify(message))
    deliver?.(message, extra)
  }
  return seen
}

const auditText = (root: string): string => {
  const dir = path.join(root, "audit")
  return fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((name) => name.endsWith(".jsonl"))
        .map((name) => fs.readFileSync(path.join(dir, name), "utf8"))
        .join("")
    : ""
}

const assertNowhere = (secrets: ReadonlyArray<string>, places: Readonly<Record<string, string>>) => {
  for (const [place, text] of Object.entries(places))
    for (const s of secrets) {
      assert.notInclude(text, s, `a secret in ${place}`)
      // Half of one is a leak too (a cut that kept its start).
      assert.notInclude(text, s.slice(3, 19), `half a secret in ${place}`)
    }
}

describe("redaction through the real servers over stdio", { timeout: 120_000 }, () => {
  it("relaykeep-tasks: secrets in every form reach neither stdout, stderr nor the audit files", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const received = recordReceived(session)
    const s = Array.from({ length: 14 }, secret)
    const calls: ReadonlyArray<readonly [string, Record<string, unknown>, boolean]> = [
      // Accepted: the payload is stored as sent; the audit entry keeps it redacted.
      [
        "submit",
        {
          client_request_id: "keys",
          payload: { prompt: "hi", api_key: s[0], nested: [{ DB_PASSWORD: s[1] }], ＴＯＫＥＮ: s[2] }
        },
        false
      ],
      [
        "submit",
        {
          client_request_id: "headers",
          payload: {
            headers: [{ name: "Authorization", value: `Bearer ${s[3]}` }],
            pairs: [["Authorization", `Bearer ${s[4]}`]],
            max_tokens: 512
          }
        },
        false
      ],
      [
        "submit",
        { client_request_id: "url", payload: { note: `use postgres://admin:${s[5]}@db.internal:5432/app` } },
        false
      ],
      // A string holding JSON that does not parse, with a secret inside.
      ["submit", { client_request_id: "json", payload: { raw: `{"password": "${s[6]}", "x": ` } }, false],
      // Refused: an unknown field, an ill-typed field, text where an id belongs, a cursor of JSON.
      ["submit", { client_request_id: "extra", payload: {}, secret_key: s[7] }, true],
      ["submit", { client_request_id: { token: s[8] }, payload: {} }, true],
      ["read", { task_id: `password=${s[9]}`, payload_sha256: "0".repeat(64) }, true],
      ["list", { cursor: `{"session": "${s[10]}"` }, true],
      ["nope", { headers: [["X-Api-Key", s[11]]] }, true]
    ]
    for (const [tool, args, isError] of calls) {
      const result = await call(session, tool, args)
      assert.strictEqual(result.isError === true, isError, `${tool}: ${result.content[0]?.text}`)
    }
    await session.client.close()
    assert.strictEqual(received.length, calls.length, "every answer was seen")
    assert.include(received.join("\n"), '"task_id"', "receipts among them")
    const audit = auditText(root)
    assert.strictEqual(audit.trim().split("\n").length, calls.length, "every call is audited")
    // The audit keeps what is not secret: the count survives, the values of the pairs do not.
    assert.include(audit, '"max_tokens":512')
    assert.include(audit, "postgres://[REDACTED]@db.internal:5432/app")

    // A whole line that does not parse, written by hand to a second server on the same root.
    const raw = mcp.rawTasks(root)
    raw.send(initializeRequest(1))
    await raw.response(1)
    raw.send(initializedNotification)
    const broken = [
      `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"submit","arguments":{"password":"${s[12]}`,
      `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"submit","arguments":{"password":"${s[13]}","password":"x"}}}`
    ]
    for (const line of broken) await raw.sendLine(line)
    await Promise.all([raw.response(2), raw.response(3)])
    raw.closeStdin()
    const exit = await raw.exited
    assert.strictEqual(exit.code, 0, exit.stderr)
    const refusals = exit.stdoutLines.filter((line) => /"id":[23],"error"|"error".*"id":[23]/.test(line))
    assert.strictEqual(refusals.length, 2, exit.stdoutLines.join("\n"))

    assertNowhere(s, {
      "the answers (stdout)": received.join("\n"),
      "the raw server's stdout": exit.stdoutLines.join("\n"),
      stderr: `${session.stderr()}\n${exit.stderr}`,
      "the audit files": auditText(root)
    })
  })

  it("relaykeep-memory: secrets in the query, an id or an unknown field are nowhere", async () => {
    const root = mcp.tempDir()
    const store = path.join(mcp.tempDir(), "memory.jsonl")
    writeLines(store, [JSON.stringify({ id: "mem-1", text: "Deploys need one approval.", source: "test" })])
    const session = await mcp.memory(store, root)
    const received = recordReceived(session)
    const s = Array.from({ length: 4 }, secret)
    await call(session, "search", { query: `deploy password=${s[0]}` })
    await call(session, "search", { query: "deploy", Authorization: `Bearer ${s[1]}` })
    await call(session, "read", { id: `https://user:${s[2]}@host/x` })
    await call(session, "read", { id: { name: "Cookie", value: `sid=${s[3]}` } })
    await session.client.close()
    assert.strictEqual(received.length, 4, "every answer was seen")
    assert.strictEqual(auditText(root).trim().split("\n").length, 4, "every call is audited")
    assertNowhere(s, {
      "the answers (stdout)": received.join("\n"),
      stderr: session.stderr(),
      "the audit files": auditText(root)
    })
  })
})
