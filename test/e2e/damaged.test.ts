/**
 * Damaged records through the built binary: never overwritten, dispatched or cancelled;
 * submit, read and cancel fail with InvalidRecord; a pass and check list them; bytes unchanged.
 */
import { assert, beforeAll, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { JsonObject, Receipt } from "../../src/domain/Task.js"
import { PassReport } from "../../src/worker/pass.js"
import { CheckOutput, failureOutput, jsonOutput, relaykeep } from "../support/cli.js"
import { recordPath, useTempDirs } from "../support/files.js"
import { seedTasks } from "../support/stores.js"

const tempDir = useTempDirs()
const root = tempDir()
const JsonRecord = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
const parseRecord = Schema.decodeUnknownSync(JsonRecord)
const encodeRecord = (record: Record<string, unknown>) => `${JSON.stringify(record, null, 2)}\n`

interface Damage {
  readonly id: string
  readonly payload: JsonObject
  /** The record file's new content, given its old content and the healthy donor's. */
  readonly damage: (original: string, donor: string) => string
  /** What the reason must say. */
  readonly reason: RegExp
}

const damages: ReadonlyArray<Damage> = [
  { id: "not-json", payload: { n: 1 }, damage: (original) => original.slice(0, 40), reason: /JSON/ },
  {
    id: "missing-field",
    payload: { n: 2 },
    damage: (original) => encodeRecord({ ...parseRecord(original), state: undefined }),
    reason: /state/
  },
  {
    id: "ill-typed",
    payload: { n: 3 },
    damage: (original) => encodeRecord({ ...parseRecord(original), attempt: "none" }),
    reason: /attempt/
  },
  { id: "wrong-id", payload: { n: 4 }, damage: (_, donor) => donor, reason: /task_id/ },
  {
    id: "payload-changed",
    payload: { n: 5 },
    damage: (original) => encodeRecord({ ...parseRecord(original), payload: { n: 500 } }),
    reason: /payload_sha256/
  }
]

const healthyIds = ["healthy-1", "donor", "healthy-2"]
const badName = path.join(root, "tasks", "whatever.json")
let damaged: ReadonlyArray<Damage & { readonly receipt: Receipt; readonly file: string }>
let healthy: ReadonlyArray<Receipt>
let original: ReadonlyMap<string, Buffer>

beforeAll(async () => {
  const receipts = await seedTasks(root, [
    ...damages.map((d) => ({ id: d.id, payload: d.payload })),
    ...healthyIds.map((id) => ({ id, payload: { id } }))
  ])
  damaged = damages.map((d, i) => {
    const receipt = receipts[i]
    if (receipt === undefined) throw new Error(`no receipt for ${d.id}`)
    return { ...d, receipt, file: recordPath(root, receipt.task_id) }
  })
  healthy = receipts.slice(damages.length)
  const donor = healthy.find((_, i) => healthyIds[i] === "donor")
  if (donor === undefined) throw new Error("no donor")
  const donorText = fs.readFileSync(recordPath(root, donor.task_id), "utf8")
  for (const d of damaged) fs.writeFileSync(d.file, d.damage(fs.readFileSync(d.file, "utf8"), donorText))
  fs.writeFileSync(badName, donorText, { mode: 0o600 })
  original = new Map([...damaged.map((d) => d.file), badName].map((file) => [file, fs.readFileSync(file)]))
})

const assertBytesUnchanged = () => {
  for (const [file, bytes] of original) {
    assert.isTrue(fs.readFileSync(file).equals(bytes), `${file} is unchanged`)
  }
}

const expectedFiles = () => [...damaged.map((d) => d.file), badName].sort()

describe("damaged records", { timeout: 120_000 }, () => {
  it("submit, read and cancel of a damaged task fail with InvalidRecord and its reason", async () => {
    const runs = damaged.flatMap((d) => {
      const receiptArgs = ["--root", root, "--task-id", d.receipt.task_id, "--sha", d.receipt.payload_sha256]
      return [
        ["submit", "--root", root, "--id", d.id, "--payload", JSON.stringify(d.payload)],
        ["read", ...receiptArgs],
        ["cancel", ...receiptArgs]
      ].map(async (args) => ({ d, args, result: await relaykeep(args) }))
    })
    for (const { d, args, result } of await Promise.all(runs)) {
      const message = failureOutput(result, 1, "InvalidRecord")
      assert.include(message, d.file, args.join(" "))
      assert.match(message.slice(message.indexOf(d.file) + d.file.length), d.reason, args.join(" "))
    }
    assertBytesUnchanged()
  })

  it("a worker pass lists every damaged live record and runs the healthy tasks", async () => {
    const pass = jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
    assert.deepStrictEqual([...pass.dispatched].sort(), healthy.map((receipt) => receipt.task_id).sort())
    // A badly named file in tasks/ is no task of the queue: finding it means listing every record
    // file, which no worker path does (its cost would grow with history). `check` reports it.
    assert.deepStrictEqual(
      pass.invalid_records.map((report) => report.file).sort(),
      damaged.map((d) => d.file).sort()
    )
    for (const d of damaged) {
      const report = pass.invalid_records.find((r) => r.file === d.file)
      assert.match(report?.reason ?? "", d.reason, d.id)
    }
    assertBytesUnchanged()
  })

  it("check lists every damaged file and is not ok", async () => {
    const check = jsonOutput(CheckOutput, await relaykeep(["check", "--root", root]))
    assert.isFalse(check.ok)
    assert.deepStrictEqual(check.invalid_records.map((report) => report.file).sort(), expectedFiles())
    for (const d of damaged) {
      const report = check.invalid_records.find((r) => r.file === d.file)
      assert.match(report?.reason ?? "", d.reason, d.id)
    }
    assertBytesUnchanged()
  })
})
