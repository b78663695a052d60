/** Every tool call lands in <root>/audit, redacted; `relaykeep audit list/prune` read and trim it. */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Receipt } from "../../../src/domain/Task.js"
import { AuditEntry } from "../../../src/domain/audit.js"
import { callError, callOk, useMcpTest } from "../../support/mcpStdio.js"
import { cliJson, relaykeep } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

const AuditList = Schema.Struct({ entries: Schema.Array(AuditEntry) })
const PruneReport = Schema.Struct({ removed: Schema.Int, kept: Schema.Int })
const Payload = Schema.Struct({
  prompt: Schema.String,
  api_key: Schema.String,
  nested: Schema.Struct({ Password: Schema.String, keep: Schema.String }),
  headers: Schema.Array(Schema.Struct({ authorization: Schema.String }))
})
const SubmitArguments = Schema.Struct({ client_request_id: Schema.String, payload: Payload })

/** Values that must never reach an audit file. */
const secrets = ["sk-live-4f2a9c0e", "hunter2-b7d1", "Bearer eyJ-9e3c"]

const auditFiles = (root: string) => {
  const dir = path.join(root, "audit")
  return fs
    .readdirSync(dir)
    .filter((name) => name.endsWith(".jsonl"))
    .map((name) => fs.readFileSync(path.join(dir, name), "utf8"))
}

describe("the audit log of MCP calls", () => {
  it("has one entry per call, ok / error / invalid, with redacted arguments; list filters, prune trims", async () => {
    const root = mcp.tempDir()
    const session = await mcp.tasks(root)
    const payload = {
      prompt: "summarise the notes",
      api_key: secrets[0],
      nested: { Password: secrets[1], keep: "visible" },
      headers: [{ authorization: secrets[2] }]
    }
    const receipt = await callOk(session, Receipt, "submit", { client_request_id: "audited", payload })
    await callError(session, "ConflictError", "submit", {
      client_request_id: "audited",
      payload: { ...payload, prompt: "another" }
    })
    await callError(session, "InvalidArguments", "read", { task_id: "nope", payload_sha256: "nope" })
    await session.client.close()

    const { entries } = cliJson(AuditList, await relaykeep(["audit", "list", "--root", root]))
    assert.deepStrictEqual(
      entries.map((entry) => [entry.server, entry.tool, entry.status, entry.error?.tag ?? null]),
      [
        ["relaykeep-tasks", "submit", "ok", null],
        ["relaykeep-tasks", "submit", "error", "ConflictError"],
        ["relaykeep-tasks", "read", "invalid", "InvalidArguments"]
      ]
    )
    for (const entry of entries) {
      assert.isTrue(
        Number.isInteger(entry.duration_ms) && entry.duration_ms >= 0,
        `duration ${entry.duration_ms}`
      )
    }
    const times = entries.map((entry) => entry.time)
    assert.deepStrictEqual(times, [...times].sort(), "oldest first")

    const [ok] = entries
    const logged = Schema.decodeUnknownSync(SubmitArguments)(ok?.arguments)
    assert.deepStrictEqual(logged, {
      client_request_id: "audited",
      payload: {
        prompt: "summarise the notes",
        api_key: "[REDACTED]",
        nested: { Password: "[REDACTED]", keep: "visible" },
        headers: [{ authorization: "[REDACTED]" }]
      }
    })
    // The task itself was submitted intact; only the audit copy is redacted.
    assert.strictEqual(receipt.task_id.length, 64)

    const raw = auditFiles(root).join("")
    assert.strictEqual(raw.trim().split("\n").length, 3, "three lines on disk")
    for (const secret of secrets) assert.notInclude(raw, secret)
    assert.include(raw, "[REDACTED]")

    const invalid = cliJson(
      AuditList,
      await relaykeep(["audit", "list", "--root", root, "--status", "invalid"])
    )
    assert.deepStrictEqual(
      invalid.entries.map((entry) => [entry.tool, entry.status]),
      [["read", "invalid"]]
    )
    const submits = cliJson(AuditList, await relaykeep(["audit", "list", "--root", root, "--tool", "submit"]))
    assert.deepStrictEqual(
      submits.entries.map((entry) => entry.status),
      ["ok", "error"]
    )

    const pruned = cliJson(
      PruneReport,
      await relaykeep(["audit", "prune", "--root", root, "--keep-last", "1"])
    )
    assert.deepStrictEqual(pruned, { removed: 2, kept: 1 })
    const left = cliJson(AuditList, await relaykeep(["audit", "list", "--root", root]))
    assert.deepStrictEqual(left.entries, entries.slice(2))
    assert.strictEqual(auditFiles(root).join("").trim().split("\n").length, 1, "one line left on disk")
  })

  it("the memory server's calls are audited too", async () => {
    const dir = mcp.tempDir()
    const root = path.join(dir, "root")
    const session = await mcp.memory(path.join(dir, "memory.jsonl"), root)
    await callOk(session, Schema.Struct({ hits: Schema.Array(Schema.Unknown) }), "search", {
      query: "anything"
    })
    await callError(session, "UnknownMemory", "read", { id: "missing" })
    await callError(session, "InvalidArguments", "search", { query: "x", token: secrets[0] })
    await session.client.close()
    const { entries } = cliJson(AuditList, await relaykeep(["audit", "list", "--root", root]))
    assert.deepStrictEqual(
      entries.map((entry) => [entry.server, entry.tool, entry.status]),
      [
        ["relaykeep-memory", "search", "ok"],
        ["relaykeep-memory", "read", "error"],
        ["relaykeep-memory", "search", "invalid"]
      ]
    )
    assert.deepStrictEqual(entries[2]?.arguments, { query: "x", token: "[REDACTED]" })
    for (const secret of secrets) assert.notInclude(auditFiles(root).join(""), secret)
  })
})
