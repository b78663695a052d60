/**
 * `relaykeep migrate --from DIR --to postgres://…` through the built binary: a file store with
 * tasks in every settled state (and one still queued) moves into a PostgreSQL queue with its
 * states, results, attempts, provider receipts and key, reads back exactly as it did from the
 * files, and a second run copies nothing. Every refusal exits 2 and copies nothing: a damaged
 * record, a running task, a queue that holds tasks under another key, a directory that is not a
 * data root. Needs RELAYKEEP_TEST_PG_URL and `npm run build`.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { CancelOutcome, Receipt, TaskState, TaskView } from "../../src/domain/Task.js"
import { PassReport } from "../../src/worker/pass.js"
import { pathWithNode } from "../chaos/support.js"
import { CheckOutput, failureOutput, jsonOutput, relaykeep } from "../support/cli.js"
import type { RunResult } from "../support/cli.js"
import { fakeClaude } from "../support/fakeCli.js"
import { recordPath, snapshotTree, useTempDirs } from "../support/files.js"
import { dropSchema, freshSchema, pgAvailable, pgQuery, pgUrl } from "../support/pg.js"
import { hostFileStoreAt, seedTasks } from "../support/stores.js"

const tempDir = useTempDirs()
const schema = freshSchema()
afterAll(async () => {
  if (pgAvailable) await dropSchema(schema)
})

/** The test server's URL with a password in it: the report must not repeat it (trust auth ignores it). */
const target = (): string => {
  const url = new URL(pgUrl ?? "postgres://localhost/test")
  url.password = "s3cret-pw"
  return url.toString()
}

const MigrateReport = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  copied: Schema.Int,
  already_present: Schema.Int,
  verified: Schema.Int,
  queue_total: Schema.Int,
  states: Schema.Record({ key: TaskState, value: Schema.Int }),
  key: Schema.Literal("adopted", "same")
})

const migrate = (from: string, queue: string) =>
  relaykeep(["migrate", "--from", from, "--to", target(), "--pg-schema", schema, "--queue", queue])

const onPg = (queue: string, command: string, rest: ReadonlyArray<string> = []) =>
  relaykeep([command, "--store", pgUrl ?? "", "--pg-schema", schema, "--queue", queue, ...rest])

const receiptArgs = (receipt: Receipt) => ["--task-id", receipt.task_id, "--sha", receipt.payload_sha256]

/** Tasks of `queue` in PostgreSQL: 0 also when the schema was never created (nothing connected). */
const tasksIn = async (queue: string): Promise<ReadonlyArray<string>> => {
  const exists = await pgQuery<{ readonly found: string | null }>("SELECT to_regclass($1)::text AS found", [
    `${schema}.tasks`
  ])
  if (exists[0]?.found == null) return []
  const rows = await pgQuery<{ readonly task_id: string }>(
    `SELECT task_id FROM "${schema}".tasks WHERE queue = $1 ORDER BY task_id`,
    [queue]
  )
  return rows.map((row) => row.task_id)
}

/** A refusal: exit 2, one `InvalidInput: <field>: …` line, and nothing in the target queue. */
const refused = (result: RunResult, field: string): string => {
  const message = failureOutput(result, 2, "InvalidInput")
  assert.isTrue(message.startsWith(`${field}: `), `names ${field}: ${message}`)
  assert.notInclude(result.stderr, "s3cret-pw")
  return message
}

/** The tasks of the source store, one per way a task can end up, and how each read before the move. */
interface Source {
  readonly root: string
  readonly receipts: Readonly<Record<string, RunResult>>
  readonly reads: Readonly<Record<string, string>>
  readonly tree: ReturnType<typeof snapshotTree>
}

const must = <A>(value: A | undefined, what: string): A => {
  if (value === undefined) throw new Error(`missing: ${what}`)
  return value
}

const sourcePayloads: Readonly<Record<string, string>> = {
  echoed: '{"message":"echo me"}',
  // The fake claude answers, so the attempt carries a provider receipt (usage, exit code, …).
  answered: '{"provider":"claude","model":"sonnet","prompt":"hello"}',
  failed: '{"provider":"no-such-provider","prompt":"x"}',
  waiting: '{"message":"still queued"}',
  dropped: '{"message":"cancelled"}'
}

describe.skipIf(!pgAvailable)("relaykeep migrate into PostgreSQL", { timeout: 150_000 }, () => {
  let source: Source

  beforeAll(async () => {
    const root = tempDir()
    const submit = (id: string) =>
      relaykeep(["submit", "--root", root, "--id", id, "--payload", must(sourcePayloads[id], id)])
    const run = ["echoed", "answered", "failed"]
    const left = ["waiting", "dropped"]
    const first = await Promise.all(run.map(submit))
    const pass = await relaykeep(
      ["worker", "--root", root, "--claude-executable", fakeClaude, "--work-dir", tempDir()],
      { env: { PATH: pathWithNode, FAKE_SCENARIO: "success" } }
    )
    assert.strictEqual(jsonOutput(PassReport, pass).dispatched.length, 3)
    const later = await Promise.all(left.map(submit))
    const ids = [...run, ...left]
    const submitted = [...first, ...later]
    const receipts = Object.fromEntries(ids.map((id, i) => [id, must(submitted[i], id)]))
    const dropped = jsonOutput(Receipt, must(receipts["dropped"], "dropped"))
    const cancel = await relaykeep(["cancel", "--root", root, ...receiptArgs(dropped)])
    assert.isTrue(jsonOutput(CancelOutcome, cancel).cancelled)
    const reads = await Promise.all(
      submitted.map((result) =>
        relaykeep(["read", "--root", root, ...receiptArgs(jsonOutput(Receipt, result))])
      )
    )
    // What the move must carry: each state, and an attempt with a provider receipt.
    const views = reads.map((read) => jsonOutput(TaskView, read))
    assert.deepStrictEqual(
      views.map((view) => view.state),
      ["complete", "complete", "failed", "queued", "cancelled"]
    )
    assert.isDefined(views[1]?.attempts[0]?.receipt, "the claude attempt has a provider receipt")
    assert.strictEqual(views[2]?.error?.tag, "UnknownProvider")
    source = {
      root,
      receipts,
      reads: Object.fromEntries(ids.map((id, i) => [id, must(reads[i], id).stdout])),
      tree: snapshotTree(root)
    }
  })

  it("copies every task with its state, result, attempts and receipts; reads give the same bytes; old ids keep their receipts", async () => {
    const result = await migrate(source.root, "moved")
    const report = jsonOutput(MigrateReport, result)
    assert.deepStrictEqual(report, {
      from: source.root,
      to: report.to,
      copied: 5,
      already_present: 0,
      verified: 5,
      queue_total: 5,
      states: { queued: 1, running: 0, complete: 2, failed: 1, cancelled: 1 },
      key: "adopted"
    })
    assert.include(report.to, schema)
    assert.include(report.to, "moved")
    assert.notInclude(result.stdout, "s3cret-pw", "the password is not in the report")
    assert.deepStrictEqual(snapshotTree(source.root), source.tree, "the source is left as it was")

    const ids = Object.keys(source.reads)
    const receipts = ids.map((id) => jsonOutput(Receipt, must(source.receipts[id], id)))
    const reads = await Promise.all(receipts.map((receipt) => onPg("moved", "read", receiptArgs(receipt))))
    ids.forEach((id, i) => {
      const read = reads[i]
      assert.strictEqual(read?.code, 0, `read ${id}: ${read?.stderr}`)
      assert.strictEqual(
        read?.stdout,
        source.reads[id],
        `${id} reads the same from PostgreSQL as from the files`
      )
    })

    // The queue took the store's key: an old client id maps to its old task, not a new one.
    const resubmits = await Promise.all(
      ["waiting", "answered"].map((id) =>
        onPg("moved", "submit", ["--id", id, "--payload", must(sourcePayloads[id], id)])
      )
    )
    resubmits.forEach((resubmit, i) => {
      const id = ["waiting", "answered"][i] ?? ""
      jsonOutput(Receipt, resubmit)
      assert.strictEqual(resubmit.stdout, source.receipts[id]?.stdout, `${id}: the original receipt`)
    })
    const check = jsonOutput(CheckOutput, await onPg("moved", "check"))
    assert.deepStrictEqual(check, {
      ok: true,
      records: 5,
      states: { queued: 1, running: 0, complete: 2, failed: 1, cancelled: 1 },
      invalid_records: []
    })
  })

  it("run again, copies nothing and finds every task already present; the moved queue then works", async () => {
    const report = jsonOutput(MigrateReport, await migrate(source.root, "moved"))
    assert.deepStrictEqual(
      { ...report, to: "" },
      {
        from: source.root,
        to: "",
        copied: 0,
        already_present: 5,
        verified: 5,
        queue_total: 5,
        states: { queued: 1, running: 0, complete: 2, failed: 1, cancelled: 1 },
        key: "same"
      }
    )
    // A worker on PostgreSQL runs the one task still queued, and nothing that had already run.
    const waiting = jsonOutput(Receipt, must(source.receipts["waiting"], "waiting"))
    const pass = jsonOutput(PassReport, await onPg("moved", "worker", ["--root", tempDir()]))
    assert.deepStrictEqual(pass.dispatched, [waiting.task_id])
    const view = jsonOutput(TaskView, await onPg("moved", "read", receiptArgs(waiting)))
    assert.strictEqual(view.state, "complete")
    assert.deepStrictEqual(view.result, { echo: { message: "still queued" }, provider: "fake-echo" })
  })

  it("refuses a source with a damaged record: exit 2, nothing copied", async () => {
    const root = tempDir()
    const [healthy, damaged] = await seedTasks(root, [
      { id: "healthy", payload: { n: 1 } },
      { id: "damaged", payload: { n: 2 } }
    ])
    if (healthy === undefined || damaged === undefined) throw new Error("no receipts")
    // The payload changed under its hash: the record no longer agrees with itself.
    const file = recordPath(root, damaged.task_id)
    const record = Schema.decodeUnknownSync(
      Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
    )(fs.readFileSync(file, "utf8"))
    fs.writeFileSync(file, `${JSON.stringify({ ...record, payload: { n: 200 } }, null, 2)}\n`)
    const message = refused(await migrate(root, "from-damaged"), "--from")
    assert.include(message, damaged.task_id)
    assert.include(message, "damaged")
    assert.deepStrictEqual(await tasksIn("from-damaged"), [])
  })

  it("refuses a source with a running task: exit 2, nothing copied", async () => {
    const root = tempDir()
    const [idle, busy] = await seedTasks(root, [
      { id: "idle", payload: { n: 1 } },
      { id: "busy", payload: { n: 2 } }
    ])
    if (idle === undefined || busy === undefined) throw new Error("no receipts")
    // A worker (this test process) holds the task: its record says running, with a lease.
    const claimed = await Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(hostFileStoreAt(root), (store) =>
          store.claim(busy.task_id, { workerId: "busy-worker", leaseMillis: 600_000 })
        )
      )
    )
    assert.isTrue(Option.isSome(claimed))
    const message = refused(await migrate(root, "from-running"), "--from")
    assert.include(message, busy.task_id)
    assert.include(message, "running")
    assert.deepStrictEqual(await tasksIn("from-running"), [])
  })

  it("refuses a queue that already exists with a key of its own: exit 2, the queue as it was", async () => {
    const occupant = jsonOutput(
      Receipt,
      await onPg("occupied", "submit", ["--id", "first-come", "--payload", '{"n":0}'])
    )
    const message = refused(await migrate(source.root, "occupied"), "--to")
    assert.include(message, "key of its own")
    assert.deepStrictEqual(await tasksIn("occupied"), [occupant.task_id])
    const view = jsonOutput(TaskView, await onPg("occupied", "read", receiptArgs(occupant)))
    assert.strictEqual(view.state, "queued")
  })

  it("a second run that meets a task changed since refuses, and keeps nothing of itself", async () => {
    const root = tempDir()
    const [kept, changed] = await seedTasks(root, [
      { id: "kept", payload: { n: 1 } },
      { id: "changed", payload: { n: 2 } }
    ])
    jsonOutput(MigrateReport, await migrate(root, "rerun"))
    // The source moves on: one task is cancelled there, and a new one arrives.
    const cancel = await relaykeep(["cancel", "--root", root, ...receiptArgs(must(changed, "changed"))])
    assert.strictEqual(cancel.code, 0, cancel.stderr)
    await seedTasks(root, [{ id: "newcomer", payload: { n: 3 } }])
    const message = refused(await migrate(root, "rerun"), "--to")
    assert.include(message, must(changed, "changed").task_id)
    assert.include(message, "other contents")
    // Rolled back whole: the newcomer was not copied, and the queue holds what the first run left.
    assert.sameMembers(
      [...(await tasksIn("rerun"))],
      [must(kept, "kept").task_id, must(changed, "changed").task_id]
    )
  })

  it("refuses a --from that is not a data root: exit 2, nothing copied", async () => {
    const notRoot = tempDir()
    fs.writeFileSync(path.join(notRoot, "notes.txt"), "not a data root\n")
    const missing = path.join(notRoot, "missing")
    const [plain, absent] = await Promise.all([
      migrate(notRoot, "from-nothing"),
      migrate(missing, "from-nothing")
    ])
    assert.include(refused(plain, "--from"), "not a RelayKeep data root")
    assert.include(refused(absent, "--from"), "not a RelayKeep data root")
    assert.isFalse(fs.existsSync(missing), "migrate creates nothing at --from")
    assert.deepStrictEqual(await tasksIn("from-nothing"), [])
  })
})
