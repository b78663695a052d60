/**
 * Bad input and domain errors at the edge: one line `Tag: message` on stderr, nothing on stdout,
 * exit 2 for usage and 1 for domain errors, and not one byte of the data root changed.
 */
import { assert, beforeAll, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { Receipt } from "../../src/domain/Task.js"
import { failureOutput, jsonOutput, relaykeep } from "../support/cli.js"
import type { RunOptions } from "../support/cli.js"
import { snapshotTree, useTempDirs } from "../support/files.js"
import { jcsSha256 } from "../support/jcs.js"
import { seedTasks } from "../support/stores.js"

const tempDir = useTempDirs()

interface Case {
  readonly name: string
  readonly args: (root: string) => ReadonlyArray<string>
  readonly options?: RunOptions
  readonly tag: string
  /** Something the message must contain, such as the field at fault. */
  readonly mentions: string
}

const secretWord = "hush-4711"
let receipt: Receipt
let payloadFile: string
let notUtf8File: string
let duplicateFile: string
const validHex = "0123456789abcdef".repeat(4)

beforeAll(async () => {
  payloadFile = path.join(tempDir(), "payload.json")
  fs.writeFileSync(payloadFile, "{}")
  duplicateFile = path.join(tempDir(), "duplicate.json")
  fs.writeFileSync(duplicateFile, `{\n  "a": {"b": 1,\n  "b": "${secretWord}"}\n}\n`)
  notUtf8File = path.join(tempDir(), "latin1.json")
  // "café" in Latin-1: the byte 0xE9 alone is not UTF-8.
  fs.writeFileSync(
    notUtf8File,
    Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0x63, 0x61, 0x66, 0xe9, 0x22, 0x7d])
  )
})

const usageCases: ReadonlyArray<Case> = [
  {
    name: "submit without --id",
    args: (root) => ["submit", "--root", root, "--payload", "{}"],
    tag: "UsageError",
    mentions: "--id"
  },
  {
    name: "a payload that is not JSON",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload", "{not json"],
    tag: "InvalidInput",
    mentions: "--payload"
  },
  {
    name: "a payload that is not an object",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload", "[1,2]"],
    tag: "InvalidInput",
    mentions: "--payload"
  },
  {
    name: "a payload over 1 MiB (from stdin)",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload", "-"],
    options: { stdin: JSON.stringify({ text: "x".repeat(1024 * 1024) }) },
    tag: "InvalidInput",
    mentions: "1048576"
  },
  {
    name: "stdin past twice the payload limit: refused before the rest is read",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload", "-"],
    options: { stdin: " ".repeat(3 * 1024 * 1024) },
    tag: "InvalidInput",
    mentions: "--payload: is over 2097152 bytes"
  },
  {
    name: "a payload file that is not UTF-8: refused, not replaced",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload-file", notUtf8File],
    tag: "InvalidInput",
    mentions: "--payload-file: is not valid UTF-8"
  },
  {
    name: "a payload with a duplicate key: refused, not last-one-wins",
    args: (root) => [
      "submit",
      "--root",
      root,
      "--id",
      "x",
      "--payload",
      `{"note":"${secretWord}","a":1,"a":2}`
    ],
    tag: "InvalidInput",
    mentions: "--payload: not valid JSON: a: duplicate key (line 1, column 27)"
  },
  {
    name: "a payload with a duplicate key at depth",
    args: (root) => [
      "submit",
      "--root",
      root,
      "--id",
      "x",
      "--payload",
      `{"x":{"y":[{"k":"${secretWord}","k":"${secretWord}"}]}}`
    ],
    tag: "InvalidInput",
    mentions: "--payload: not valid JSON: x.y.0.k: duplicate key (line 1, column 29)"
  },
  {
    name: "a payload file with a duplicate key",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload-file", duplicateFile],
    tag: "InvalidInput",
    mentions: "--payload-file: not valid JSON: a.b: duplicate key (line 3, column 3)"
  },
  {
    name: "a payload from stdin with an integer beyond 2^53",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload", "-"],
    options: { stdin: '{"n":9007199254740993}' },
    tag: "InvalidInput",
    mentions:
      "--payload: not valid JSON: n: a number beyond ±(2^53−1) cannot be held exactly (line 1, column 6)"
  },
  {
    name: "a payload with an integer beyond 2^53 (which JSON.parse would read as 2^53)",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload", '{"ids":[1,9007199254740993]}'],
    tag: "InvalidInput",
    mentions: "--payload: not valid JSON: ids.1: a number beyond ±(2^53−1) cannot be held exactly"
  },
  {
    name: "a payload with a lone surrogate escape",
    args: (root) => [
      "submit",
      "--root",
      root,
      "--id",
      "x",
      "--payload",
      String.raw`{"s":"${secretWord}\ud800"}`
    ],
    tag: "InvalidInput",
    mentions:
      "--payload: not valid JSON: s: a string is not well-formed Unicode (a lone surrogate) (line 1, column 6)"
  },
  {
    name: "an invalid --task-id",
    args: (root) => ["read", "--root", root, "--task-id", "not-a-task", "--sha", validHex],
    tag: "InvalidInput",
    mentions: "--task-id"
  },
  {
    name: "an invalid --sha",
    args: (root) => ["cancel", "--root", root, "--task-id", validHex, "--sha", "XYZ"],
    tag: "InvalidInput",
    mentions: "--sha"
  },
  {
    name: "an unknown subcommand",
    args: (root) => ["frobnicate", "--root", root],
    tag: "UsageError",
    mentions: "subcommand"
  },
  {
    name: "list --limit 0 (refused, as MCP refuses it, never clamped)",
    args: (root) => ["list", "--root", root, "--limit", "0"],
    tag: "UsageError",
    mentions: "--limit: must be from 1 to 500"
  },
  {
    name: "list --limit 501",
    args: (root) => ["list", "--root", root, "--limit", "501"],
    tag: "UsageError",
    mentions: "--limit: must be from 1 to 500"
  },
  {
    name: "worker --limit 0",
    args: (root) => ["worker", "--root", root, "--limit", "0"],
    tag: "UsageError",
    mentions: "--limit: must be from 1 to 1000000"
  },
  {
    name: "worker --watch --limit 5 (a watching worker has no limit)",
    args: (root) => ["worker", "--root", root, "--watch", "--limit", "5"],
    tag: "InvalidInput",
    mentions: "--limit"
  },
  {
    name: "both --payload and --payload-file",
    args: (root) => ["submit", "--root", root, "--id", "x", "--payload", "{}", "--payload-file", payloadFile],
    tag: "InvalidInput",
    mentions: "--payload"
  }
]

const domainCases: ReadonlyArray<Case> = [
  {
    name: "the same id with a different payload: ConflictError",
    args: (root) => ["submit", "--root", root, "--id", "kept", "--payload", '{"other":true}'],
    tag: "ConflictError",
    // The request id is the caller's input: named as a field, never quoted.
    mentions: "client_request_id: already task"
  },
  {
    name: "read with the wrong hash: HashMismatch",
    args: (root) => ["read", "--root", root, "--task-id", receipt.task_id, "--sha", "f".repeat(64)],
    tag: "HashMismatch",
    mentions: "payload_sha256"
  },
  {
    name: "cancel with the wrong hash: HashMismatch",
    args: (root) => ["cancel", "--root", root, "--task-id", receipt.task_id, "--sha", "e".repeat(64)],
    tag: "HashMismatch",
    mentions: "payload_sha256"
  },
  {
    name: "read of an unknown task: UnknownTask",
    args: (root) => ["read", "--root", root, "--task-id", validHex, "--sha", receipt.payload_sha256],
    tag: "UnknownTask",
    mentions: validHex
  }
]

describe("relaykeep errors", { timeout: 120_000 }, () => {
  const root = path.join(tempDir(), "root")
  beforeAll(async () => {
    const [seeded] = await seedTasks(root, [{ id: "kept", payload: { secret: secretWord } }])
    if (seeded === undefined) throw new Error("no receipt")
    receipt = seeded
  })

  const expectFailure = async (c: Case, exitCode: 1 | 2) => {
    const before = snapshotTree(root)
    assert.isNotNull(before)
    const result = await relaykeep(c.args(root), c.options)
    const message = failureOutput(result, exitCode, c.tag)
    assert.include(message, c.mentions)
    assert.notInclude(result.stderr, secretWord)
    assert.deepStrictEqual(snapshotTree(root), before, "the data root is unchanged")
  }

  for (const c of usageCases) it(`${c.name} exits 2 and changes nothing`, () => expectFailure(c, 2))
  for (const c of domainCases) it(`${c.name} exits 1 and changes nothing`, () => expectFailure(c, 1))

  it("a payload with __proto__ and constructor keys is kept as sent: its receipt is the RFC 8785 hash of what was sent", async () => {
    const own = path.join(tempDir(), "proto-root")
    const sent = String.raw`{"b":2,"__proto__":{"admin":true},"constructor":{"prototype":null},"a":[1,"\u00e9"]}`
    const receipt = jsonOutput(
      Receipt,
      await relaykeep(["submit", "--root", own, "--id", "proto", "--payload", sent])
    )
    // JSON.parse keeps `__proto__` as an own member; jcs.ts canonicalizes independently of src/.
    const asSent: unknown = JSON.parse(sent)
    assert.strictEqual(receipt.payload_sha256, jcsSha256(asSent))
    assert.notStrictEqual(
      receipt.payload_sha256,
      jcsSha256({ b: 2, constructor: { prototype: null }, a: [1, "é"] })
    )
    // Without the __proto__ member it is another payload: under the same id, a conflict.
    const before = snapshotTree(own)
    const other = await relaykeep([
      "submit",
      "--root",
      own,
      "--id",
      "proto",
      "--payload",
      '{"b":2,"constructor":{"prototype":null},"a":[1,"é"]}'
    ])
    assert.include(failureOutput(other, 1, "ConflictError"), "client_request_id: already task")
    assert.deepStrictEqual(snapshotTree(own), before, "the data root is unchanged")
    const again = jsonOutput(
      Receipt,
      await relaykeep(["submit", "--root", own, "--id", "proto", "--payload", sent])
    )
    assert.deepStrictEqual(again, receipt, "the same payload again: the same receipt")
  })

  it("usage errors on a root that does not exist yet create nothing", async () => {
    const parent = tempDir()
    // Every process has exited before anything is asserted, so none outlives the temp dir.
    const runs = await Promise.all(
      usageCases.map(async (c, index) => {
        const fresh = path.join(parent, `root-${index}`)
        return { c, fresh, result: await relaykeep(c.args(fresh), c.options) }
      })
    )
    const results = runs.map(({ c, fresh, result }) => {
      failureOutput(result, 2, c.tag)
      return { name: c.name, created: fs.existsSync(fresh) }
    })
    assert.deepStrictEqual(
      results.filter((r) => r.created).map((r) => r.name),
      [],
      "these bad inputs created a data root"
    )
    assert.deepStrictEqual(fs.readdirSync(parent), [])
  })
})
