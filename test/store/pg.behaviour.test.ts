/**
 * The PostgreSQL store against rows damaged behind its back, and against a transaction that
 * holds a row: what a worker sees and does, through the library, with raw SQL for the damage.
 *
 * A damaged row (a record that is not JSON, a payload that no longer matches its hash, columns
 * that disagree with the record, a record stored under another task's id, a task_id that is
 * not a task id) is reported by `check` and `live`, refused by every operation with
 * InvalidRecord, skipped by `list`, and never rewritten.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Duration, Effect, Either, Exit, Option, Schedule, Schema } from "effect"
import pg from "pg"
import { InvalidRecord } from "../../src/domain/errors.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import type { JsonObject, Receipt } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import {
  dropSchema,
  freshSchema,
  pgAvailable,
  pgQuery,
  pgStoreAt,
  pgUrl,
  scopedSchema
} from "../support/pg.js"

const id = (text: string) => ClientRequestId.make(text)
/** The InvalidRecord an operation failed with, or what it did instead. */
const invalidRecordOf = <A, E extends { readonly _tag: string }>(operation: Effect.Effect<A, E>) =>
  Effect.match(operation, {
    onSuccess: (answer) => Either.left(`succeeded: ${JSON.stringify(answer).slice(0, 300)}`),
    onFailure: (error) =>
      error instanceof InvalidRecord ? Either.right(error) : Either.left(`failed with ${error._tag}`)
  })
const worker = { workerId: "w1", leaseMillis: 60_000 }
const JsonRecord = Schema.parseJson(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
const parseRecord = Schema.decodeUnknownSync(JsonRecord)

type RowText = {
  readonly task_id: string
  readonly state: string
  readonly created_at: string
  readonly not_before: string | null
  readonly record: string
  readonly payload: string | null
  /** The transaction that wrote this version of the row: any rewrite, even to equal bytes, changes it. */
  readonly xmin: string
}

interface Damage {
  readonly id: string
  readonly payload: JsonObject
  /** What the reason must say. */
  readonly reason: RegExp
  /** Whether the damage leaves the row reachable by its receipt's task id. */
  readonly addressable: boolean
}

const damages: ReadonlyArray<Damage> = [
  { id: "not-json", payload: { n: 1 }, reason: /JSON/, addressable: true },
  { id: "payload-changed", payload: { n: 2 }, reason: /payload_sha256/, addressable: true },
  // A record that holds a payload while the row's payload column holds another: which is it?
  { id: "payload-twice", payload: { n: 7 }, reason: /disagrees with its payload column/, addressable: true },
  {
    id: "payload-not-json",
    payload: { n: 8 },
    reason: /payload column is not valid JSON/,
    addressable: true
  },
  // The state column says running, the record queued: a worker must not claim (and rewrite) it.
  { id: "column-running", payload: { n: 3 }, reason: /columns disagree with its record/, addressable: true },
  // Cancelled in its record, queued in its column: it must not come back to life.
  { id: "column-queued", payload: { n: 4 }, reason: /columns disagree with its record/, addressable: true },
  { id: "wrong-id", payload: { n: 5 }, reason: /task_id/, addressable: true },
  { id: "not-a-task-id", payload: { n: 6 }, reason: /not a task id/, addressable: false }
]
const NotATaskId = "not-a-task-id"

describe.skipIf(!pgAvailable)("PostgreSQL store: damaged rows", () => {
  const schema = freshSchema()
  const tasks = `"${schema}".tasks`
  let healthy: ReadonlyArray<Receipt> = []
  let damaged: ReadonlyArray<Damage & { readonly receipt: Receipt; readonly rowId: string }> = []
  const rowIds = () => damaged.map((d) => d.rowId)

  const rowsNow = () =>
    pgQuery<RowText>(
      `SELECT task_id, state, created_at, not_before, record, payload, xmin::text AS xmin FROM ${tasks}
       WHERE task_id = ANY($1) ORDER BY task_id`,
      [rowIds()]
    )
  let original: ReadonlyArray<RowText> = []

  beforeAll(async () => {
    // Healthy and damaged tasks alternate in submission order, so that every page boundary of
    // a listing falls next to a damaged row somewhere.
    const requests = damages.flatMap((d, i) => [
      { id: `healthy-${i}`, payload: { healthy: i } },
      { id: d.id, payload: d.payload }
    ])
    requests.push({ id: "healthy-last", payload: { healthy: damages.length } })
    const receipts = await Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(pgStoreAt(schema), (store) =>
          Effect.forEach(requests, (request) =>
            // Distinct creation times, so the order is the submission order.
            Effect.zipLeft(
              store.submit({ clientRequestId: id(request.id), payload: request.payload }),
              Effect.sleep(Duration.millis(3))
            )
          ).pipe(
            Effect.tap((receipts) => {
              const cancelled = receipts[requests.findIndex((r) => r.id === "column-queued")]
              return cancelled === undefined
                ? Effect.die("no receipt for column-queued")
                : store.cancel(cancelled.task_id, cancelled.payload_sha256)
            })
          )
        )
      )
    )
    const receiptOf = (name: string) => {
      const receipt = receipts[requests.findIndex((r) => r.id === name)]
      if (receipt === undefined) throw new Error(`no receipt for ${name}`)
      return receipt
    }
    healthy = requests.filter((r) => r.id.startsWith("healthy")).map((r) => receiptOf(r.id))
    damaged = damages.map((d) => {
      const receipt = receiptOf(d.id)
      return { ...d, receipt, rowId: d.id === "not-a-task-id" ? NotATaskId : receipt.task_id }
    })
    const recordOf = async (taskId: string) => {
      const [row] = await pgQuery<{ readonly record: string }>(
        `SELECT record FROM ${tasks} WHERE task_id = $1`,
        [taskId]
      )
      if (row === undefined) throw new Error(`no row ${taskId}`)
      return row.record
    }
    const donor = healthy[0]
    if (donor === undefined) throw new Error("no donor")
    const donorRecord = await recordOf(donor.task_id)
    const update = (name: string, set: string, values: ReadonlyArray<unknown> = []) =>
      pgQuery(`UPDATE ${tasks} SET ${set} WHERE task_id = $1`, [receiptOf(name).task_id, ...values])
    await update("not-json", "record = left(record, 40)")
    await update("payload-changed", "payload = $2", [JSON.stringify({ n: 500 })])
    const twice = parseRecord(await recordOf(receiptOf("payload-twice").task_id))
    await update("payload-twice", "record = $2", [JSON.stringify({ ...twice, payload: { n: 70 } })])
    await update("payload-not-json", "payload = left(payload, 3)")
    await update("column-running", "state = 'running'")
    await update("column-queued", "state = 'queued'")
    await update("wrong-id", "record = $2", [donorRecord])
    await update("not-a-task-id", "task_id = $2", [NotATaskId])
    original = await rowsNow()
    assert.lengthOf(original, damages.length)
  })

  afterAll(() => dropSchema(schema))

  const assertRowsUnchanged = Effect.promise(rowsNow).pipe(
    Effect.map((rows) =>
      assert.deepStrictEqual(rows, original, "every damaged row is as it was, byte for byte")
    )
  )

  /** The damaged row's report, named by schema, queue and task. */
  const assertNamed = (reports: ReadonlyArray<{ readonly file: string; readonly reason: string }>) => {
    assert.lengthOf(reports, damaged.length)
    for (const d of damaged) {
      const report = reports.find((r) => r.file.endsWith(` schema ${schema} queue default task ${d.rowId}`))
      assert.isDefined(report, `a report names ${d.id}`)
      assert.match(report?.file ?? "", /^postgres postgres(ql)?:\/\//, d.id)
      assert.match(report?.reason ?? "", d.reason, d.id)
    }
  }

  const opened = () => pgStoreAt(schema)

  it.scopedLive("check reports every damaged row, naming its schema, queue and task", () =>
    Effect.gen(function* () {
      const store = yield* opened()
      const report = yield* store.check
      assert.strictEqual(report.records, healthy.length + damaged.length)
      assert.strictEqual(report.states.queued, healthy.length, "only the healthy rows are counted by state")
      assertNamed(report.invalid_records)
      yield* assertRowsUnchanged
    })
  )

  it.scopedLive("live lists every damaged row as invalid, never as queued, ready or running", () =>
    Effect.gen(function* () {
      const store = yield* opened()
      const live = yield* store.live
      const ids = healthy.map((r) => r.task_id)
      assert.deepStrictEqual(live.queued, ids, "the healthy tasks, oldest first, and nothing else")
      assert.deepStrictEqual(
        live.ready.map((r) => r.task_id),
        ids
      )
      assert.deepStrictEqual(live.running, [])
      assertNamed(live.invalid)
      yield* assertRowsUnchanged
    })
  )

  it.scopedLive(
    "claim, read, cancel and resubmit of a damaged task fail with InvalidRecord and change nothing",
    () =>
      Effect.gen(function* () {
        const store = yield* opened()
        for (const d of damaged.filter((d) => d.addressable)) {
          const taskId = d.receipt.task_id
          const sha = d.receipt.payload_sha256
          const outcomes = {
            claim: yield* invalidRecordOf(store.claim(taskId, worker)),
            read: yield* invalidRecordOf(store.read(taskId, sha)),
            cancel: yield* invalidRecordOf(store.cancel(taskId, sha)),
            submit: yield* invalidRecordOf(store.submit({ clientRequestId: id(d.id), payload: d.payload }))
          }
          for (const [operation, outcome] of Object.entries(outcomes)) {
            const label = `${operation} of ${d.id}`
            if (Either.isLeft(outcome)) return assert.fail(`${label} ${outcome.left}`)
            assert.isTrue(
              outcome.right.file.endsWith(`task ${taskId}`),
              `${label} names the task: ${outcome.right.file}`
            )
            assert.match(outcome.right.reason, d.reason, label)
          }
        }
        yield* assertRowsUnchanged
        // The healthy tasks are untouched by all this, and still claimable.
        const live = yield* store.live
        assert.lengthOf(live.ready, healthy.length)
      })
  )

  it.scopedLive("list skips damaged rows and pages past them: every healthy task exactly once", () =>
    Effect.gen(function* () {
      const store = yield* opened()
      const newestFirst = healthy.map((r) => r.task_id).reverse()
      for (const [limit, state, search] of [
        [1, undefined],
        [2, undefined],
        [3, undefined],
        [1, "queued"],
        [50, undefined],
        // The dashboard's filters read past damaged rows too (some are not even JSON).
        [1, undefined, "HEALTHY"],
        [2, "queued", "healthy"]
      ] as const) {
        const seen: Array<TaskId> = []
        let cursor: string | undefined
        let pages = 0
        for (;;) {
          const page = yield* store.list({ limit, state, cursor, search })
          pages += 1
          assert.isAtMost(page.tasks.length, limit)
          seen.push(...page.tasks.map((task) => task.task_id))
          if (page.next_cursor === null) break
          assert.lengthOf(page.tasks, limit, "a page with a next page is full")
          cursor = page.next_cursor
          assert.isAtMost(pages, healthy.length + damaged.length, "paging ends")
        }
        assert.deepStrictEqual(seen, newestFirst, `limit ${limit}, state ${state ?? "any"}`)
      }
      const byProvider = yield* store.list({ provider: "codex" })
      assert.deepStrictEqual(byProvider.tasks, [])
      for (const d of damaged.filter((d) => d.addressable)) {
        const record = yield* Effect.flip(store.record(d.receipt.task_id))
        assert.strictEqual(record._tag, "InvalidRecord", `record of ${d.id}`)
      }
      yield* assertRowsUnchanged
    })
  )
})

/** Hold `taskId`'s row with `SELECT … FOR UPDATE` in an open transaction on a connection of its own. */
const holdRow = (schema: string, taskId: TaskId) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: pgUrl })
      await client.connect()
      await client.query("BEGIN")
      const held = await client.query(`SELECT task_id FROM "${schema}".tasks WHERE task_id = $1 FOR UPDATE`, [
        taskId
      ])
      assert.strictEqual(held.rowCount, 1)
      return client
    }),
    (client) => Effect.promise(() => client.query("ROLLBACK").finally(() => client.end()))
  ).pipe(Effect.map((client) => Effect.promise(() => client.query("ROLLBACK"))))

describe.skipIf(!pgAvailable)("PostgreSQL store: a row another transaction holds", () => {
  const submitTwo = (store: TaskStoreShape) =>
    Effect.all([
      store.submit({ clientRequestId: id("held"), payload: { n: 1 } }),
      store.submit({ clientRequestId: id("free"), payload: { n: 2 } })
    ])

  it.scopedLive(
    "a claim passes over it at once (SKIP LOCKED), claims another, and takes it once it is free",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const store = yield* pgStoreAt(schema)
        const [held, free] = yield* submitTwo(store)
        const rollback = yield* holdRow(schema, held.task_id)
        // Waiting for the lock would outlast this deadline: the holder never lets go by itself.
        const passed = yield* store.claim(held.task_id, worker).pipe(
          Effect.timeoutFail({
            duration: Duration.seconds(10),
            onTimeout: () => "the claim waited for the row's lock instead of passing it over"
          })
        )
        assert.isTrue(Option.isNone(passed), "a held row is not claimed")
        assert.strictEqual((yield* store.read(held.task_id, held.payload_sha256)).state, "queued")
        const other = yield* store.claim(free.task_id, worker).pipe(Effect.timeout(Duration.seconds(10)))
        assert.isTrue(Option.isSome(other), "another queued task is claimed meanwhile")
        yield* rollback
        const claimed = yield* store.claim(held.task_id, worker)
        assert.isTrue(Option.isSome(claimed), "claimed once the holder let go")
        assert.strictEqual((yield* store.read(held.task_id, held.payload_sha256)).state, "running")
      })
  )

  it.scopedLive("a cancel, unlike a claim, waits for the holder and then applies", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const store = yield* pgStoreAt(schema)
      const [held] = yield* submitTwo(store)
      const rollback = yield* holdRow(schema, held.task_id)
      const cancel = yield* Effect.fork(store.cancel(held.task_id, held.payload_sha256))
      // It cannot commit while the row is held, however long we look.
      yield* Effect.sleep(Duration.millis(500))
      const early = yield* cancel.poll
      assert.isTrue(Option.isNone(early), "the cancel waited for the row")
      yield* rollback
      const outcome = yield* cancel.await.pipe(Effect.timeout(Duration.seconds(20)))
      assert.isTrue(Exit.isSuccess(outcome) && outcome.value.cancelled, "cancelled once the holder let go")
    })
  )
})

/**
 * Cancel every statement of `schema`'s store that waits for a row lock, as a cancel request
 * meant for another query does (the driver cancels by connection, not by query). Polled until
 * one is found, since the waiter may not have reached the lock yet.
 */
const cancelLockWaiters = (schema: string) =>
  Effect.promise(() =>
    // The waiters are picked first, so that nothing else (this query least of all) is cancelled.
    pgQuery<{ readonly pid: number }>(
      `WITH waiters AS MATERIALIZED (
         SELECT pid FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0
       )
       SELECT pid FROM waiters WHERE pg_cancel_backend(pid)`,
      [schema]
    )
  ).pipe(
    Effect.filterOrFail(
      (cancelled) => cancelled.length > 0,
      () => "nothing waits yet"
    ),
    Effect.retry(Schedule.spaced(Duration.millis(50))),
    Effect.timeoutFail({ duration: Duration.seconds(10), onTimeout: () => "no statement waited for the row" })
  )

describe.skipIf(!pgAvailable)("PostgreSQL store: a statement cancelled under it", () => {
  it.scopedLive("a transition whose statement a stray cancel ended is run again and applies once", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const store = yield* pgStoreAt(schema)
      const held = yield* store.submit({ clientRequestId: id("held"), payload: { n: 1 } })
      const rollback = yield* holdRow(schema, held.task_id)
      const cancel = yield* Effect.fork(store.cancel(held.task_id, held.payload_sha256))
      const cancelled = yield* cancelLockWaiters(schema)
      assert.strictEqual(cancelled.length, 1, "one statement waited for the row, and was cancelled")
      yield* rollback
      const outcome = yield* cancel.await.pipe(Effect.timeout(Duration.seconds(20)))
      assert.isTrue(
        Exit.isSuccess(outcome) && outcome.value.cancelled,
        `the cancel was run again and applied: ${JSON.stringify(outcome)}`
      )
      const view = yield* store.read(held.task_id, held.payload_sha256)
      assert.strictEqual(view.state, "cancelled")
    })
  )
})

describe.skipIf(!pgAvailable)("PostgreSQL store: writers racing on one row", () => {
  it.scopedLive(
    "a cancel racing a running task's heartbeats from another process is never lost (compare-and-set)",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        // Two stores with pools of their own, as a worker and a client would be.
        const workerSide = yield* pgStoreAt(schema, { hostname: "worker-box", pid: 100 })
        const clientSide = yield* pgStoreAt(schema, { hostname: "client-box", pid: 200 })
        const rounds = 25
        for (let round = 0; round < rounds; round++) {
          const receipt = yield* clientSide.submit({
            clientRequestId: id(`race-${round}`),
            payload: { round }
          })
          const claimed = Option.getOrThrow(yield* workerSide.claim(receipt.task_id, worker))
          // Each heartbeat reads the row and writes it back: one that read it before the cancel
          // landed and wrote after would drop `cancel_requested_at` if writes were blind.
          const [outcome] = yield* Effect.all(
            [
              clientSide.cancel(receipt.task_id, receipt.payload_sha256),
              ...Array.from({ length: 6 }, () => workerSide.heartbeat(receipt.task_id, claimed.lease, 60_000))
            ],
            { concurrency: "unbounded" }
          )
          assert.deepInclude(outcome, { cancel_requested: true, state: "running" })
          const record = yield* clientSide.record(receipt.task_id)
          assert.isDefined(record.cancel_requested_at, `round ${round}: the cancel request was lost`)
          assert.strictEqual(record.lease?.owner_token, claimed.lease.owner_token)
          // And the worker's next heartbeat hears it.
          const beat = yield* workerSide.heartbeat(receipt.task_id, claimed.lease, 60_000)
          assert.isTrue(beat.cancelRequested, `round ${round}: the worker was not told`)
        }
      })
  )
})

describe.skipIf(!pgAvailable)("PostgreSQL store: one-statement transitions", () => {
  it.scopedLive(
    "a write the store did not see (an older relaykeep, a hand edit) moves the fence: the next outcome applies to the row as it is",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const store = yield* pgStoreAt(schema)
        const receipt = yield* store.submit({ clientRequestId: id("edited"), payload: { n: 1 } })
        const claimed = Option.getOrThrow(yield* store.claim(receipt.task_id, worker))
        // A writer that knows nothing of revisions records a cancel request in the record text.
        const rows = yield* Effect.promise(() =>
          pgQuery<{ readonly record: string }>(`SELECT record FROM "${schema}".tasks WHERE task_id = $1`, [
            receipt.task_id
          ])
        )
        const edited = { ...parseRecord(rows[0]?.record), cancel_requested_at: "2026-01-01T00:00:00.000Z" }
        yield* Effect.promise(() =>
          pgQuery(`UPDATE "${schema}".tasks SET record = $2 WHERE task_id = $1`, [
            receipt.task_id,
            JSON.stringify(edited)
          ])
        )
        // Retryable, so without the request it would be queued again; with it, it ends cancelled.
        const state = yield* store.fail(receipt.task_id, claimed.lease, {
          tag: "Boom",
          message: "scripted",
          retryable: true
        })
        assert.strictEqual(
          state,
          "cancelled",
          "the outcome was computed from the record the store remembered"
        )
        assert.strictEqual((yield* store.record(receipt.task_id)).state, "cancelled")
      })
  )

  it.scopedLive(
    "claimNext reports a damaged ready row, puts it back as it was, and claims the next healthy one in its place",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const store = yield* pgStoreAt(schema)
        const [first, broken, third] = yield* Effect.forEach(["first", "broken", "third"], (name) =>
          Effect.zipLeft(
            store.submit({ clientRequestId: id(name), payload: { name } }),
            Effect.sleep(Duration.millis(3))
          )
        )
        const columns = (taskId: string | undefined) =>
          Effect.promise(() =>
            pgQuery<{
              readonly state: string
              readonly not_before: string | null
              readonly record: string
              readonly pending_claim: string | null
            }>(`SELECT state, not_before, record, pending_claim FROM "${schema}".tasks WHERE task_id = $1`, [
              taskId
            ])
          )
        // Damaged, and waiting out a backoff that is over: both must survive the put-back.
        yield* Effect.promise(() =>
          pgQuery(
            `UPDATE "${schema}".tasks SET record = left(record, 40), not_before = '2020-01-01T00:00:00.000Z'
             WHERE task_id = $1`,
            [broken?.task_id]
          )
        )
        const before = yield* columns(broken?.task_id)
        const batch = yield* store.claimNext({ ...worker, limit: 2 })
        assert.deepStrictEqual(
          batch.claimed.map((claimed) => claimed.record.task_id),
          [first?.task_id, third?.task_id]
        )
        assert.lengthOf(batch.invalid, 1)
        assert.match(batch.invalid[0]?.reason ?? "", /JSON/)
        const after = yield* columns(broken?.task_id)
        assert.deepStrictEqual(after, before, "put back as it was")
        assert.deepInclude(after[0], {
          state: "queued",
          not_before: "2020-01-01T00:00:00.000Z",
          pending_claim: null
        })
      })
  )

  it.scopedLive("a worker's transitions on a task it claimed each bump the revision once", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const store = yield* pgStoreAt(schema)
      const receipt = yield* store.submit({ clientRequestId: id("counted"), payload: { n: 1 } })
      const revision = Effect.promise(() =>
        pgQuery<{ readonly revision: string }>(
          `SELECT revision::text FROM "${schema}".tasks WHERE task_id = $1`,
          [receipt.task_id]
        )
      ).pipe(Effect.map((found) => Number(found[0]?.revision)))
      assert.strictEqual(yield* revision, 0)
      const batch = yield* store.claimNext({ ...worker, limit: 1 })
      const lease = batch.claimed[0]?.lease
      assert.isDefined(lease)
      if (lease === undefined) return
      yield* store.recordProcess(receipt.task_id, lease, 4242)
      const beat = yield* store.heartbeat(receipt.task_id, lease, 60_000)
      assert.strictEqual(yield* store.complete(receipt.task_id, beat.lease, { ok: true }), "complete")
      assert.strictEqual(yield* revision, 4, "claim, process, heartbeat, complete: one write each")
      const record = yield* store.record(receipt.task_id)
      assert.strictEqual(record.attempts[0]?.process_group, 4242)
      assert.deepStrictEqual(record.result, { ok: true })
    })
  )
})

describe.skipIf(!pgAvailable)("PostgreSQL store: counts", () => {
  it.scopedLive(
    "counts read the state column: a damaged row counts under its column, a state no relaykeep writes does not",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const store = yield* pgStoreAt(schema)
        const [damaged, edited] = yield* Effect.forEach(["damaged", "edited", "fine"], (name) =>
          store.submit({ clientRequestId: id(name), payload: { name } })
        )
        yield* Effect.promise(() =>
          pgQuery(`UPDATE "${schema}".tasks SET record = 'not json' WHERE task_id = $1`, [damaged?.task_id])
        )
        yield* Effect.promise(() =>
          pgQuery(`UPDATE "${schema}".tasks SET state = 'bogus' WHERE task_id = $1`, [edited?.task_id])
        )
        assert.deepStrictEqual(yield* store.counts, {
          queued: 2,
          running: 0,
          complete: 0,
          failed: 0,
          cancelled: 0
        })
        const report = yield* store.check
        assert.strictEqual(report.states.queued, 1, "check counts only what decodes")
        assert.lengthOf(report.invalid_records, 2)
      })
  )
})
