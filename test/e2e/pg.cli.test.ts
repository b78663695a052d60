/**
 * Every queue command through the built binary on PostgreSQL (`--store postgres://…` or
 * RELAYKEEP_STORE): the same answers as on the file store, queues kept apart, tables created in
 * the chosen schema only, usage errors before anything connects, and a password that never
 * reaches a message. Needs RELAYKEEP_TEST_PG_URL and `npm run build`.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import { CancelOutcome, Receipt, TaskView } from "../../src/domain/Task.js"
import { PassReport } from "../../src/worker/pass.js"
import { ReapReport } from "../../src/worker/reap.js"
import { delay, killAllWorkers, startWorker, stopWorker } from "../chaos/support.js"
import { CheckOutput, ListOutput, failureOutput, jsonOutput, relaykeep } from "../support/cli.js"
import type { RunOptions, RunResult } from "../support/cli.js"
import { useTempDirs } from "../support/files.js"
import type { HostOptions } from "../support/stores.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { dropSchema, freshSchema, pgAvailable, pgQuery, pgStoreAt, pgUrl } from "../support/pg.js"
import { SchemaVersion } from "../../src/store/postgres/schema.js"

const tempDir = useTempDirs()
const url = pgUrl ?? ""

/** Every schema this file touches, dropped after its tests. */
const schemas: Array<string> = []
const newSchema = (): string => {
  const schema = freshSchema()
  schemas.push(schema)
  return schema
}
afterAll(async () => {
  await killAllWorkers()
  if (pgAvailable) for (const schema of schemas.splice(0)) await dropSchema(schema)
})

/** `relaykeep <command> --store <url> --pg-schema <schema> --queue <queue> ...rest`. */
const onPg =
  (schema: string, queue: string) =>
  (command: string, rest: ReadonlyArray<string> = [], options?: RunOptions) =>
    relaykeep([command, "--store", url, "--pg-schema", schema, "--queue", queue, ...rest], options)

const receiptArgs = (receipt: Receipt) => ["--task-id", receipt.task_id, "--sha", receipt.payload_sha256]

/** The task's row as PostgreSQL holds it: the state column and the record text. */
const rowOf = async (schema: string, queue: string, taskId: string) => {
  const rows = await pgQuery<{ readonly state: string; readonly record: string }>(
    `SELECT state, record FROM "${schema}".tasks WHERE queue = $1 AND task_id = $2`,
    [queue, taskId]
  )
  return rows[0]
}

/** Run `use` on the store of `queue` in `schema`, opened in this process (a machine of its own). */
const inQueue = <A, E>(
  schema: string,
  queue: string,
  use: (store: TaskStoreShape) => Effect.Effect<A, E>,
  host: HostOptions = {}
): Promise<A> => Effect.runPromise(Effect.scoped(Effect.flatMap(pgStoreAt(schema, host, queue), use)))

const tableNames = async (schema: string): Promise<ReadonlyArray<string>> =>
  (
    await pgQuery<{ readonly table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name",
      [schema]
    )
  ).map((row) => row.table_name)

describe.skipIf(!pgAvailable)("relaykeep on PostgreSQL", { timeout: 120_000 }, () => {
  const schema = newSchema()

  /**
   * Commands against a server that refuses connections: each retries for about 20 s before it
   * gives up, so they start with the file and are awaited by the last test.
   */
  let unreachable: Promise<ReadonlyArray<RunResult>> = Promise.resolve([])
  beforeAll(() => {
    const secretUrl = "postgres://postgres:hunter2@127.0.0.1:1/test"
    unreachable = Promise.all([
      relaykeep(["list", "--store", secretUrl, "--pg-schema", schema]),
      relaykeep(["submit", "--id", "x", "--payload", "{}"], {
        env: { RELAYKEEP_STORE: secretUrl, RELAYKEEP_PG_SCHEMA: schema }
      })
    ])
  })

  it("submit is idempotent, a changed payload is a ConflictError that changes nothing; read, cancel, one worker pass", async () => {
    const pg = onPg(schema, "lifecycle")
    const payload = '{"message":"hello","n":1}'
    const first = await pg("submit", ["--id", "job-1", "--payload", payload])
    const receipt = jsonOutput(Receipt, first)
    const before = await rowOf(schema, "lifecycle", receipt.task_id)
    assert.strictEqual(before?.state, "queued")

    const [again, changed, other] = await Promise.all([
      pg("submit", ["--id", "job-1", "--payload", payload]),
      pg("submit", ["--id", "job-1", "--payload", '{"message":"something else"}']),
      pg("submit", ["--id", "job-2", "--payload", '{"message":"cancel me"}'])
    ])
    assert.strictEqual(again.stdout, first.stdout, "the same id and payload give the byte-identical receipt")
    assert.include(failureOutput(changed, 1, "ConflictError"), receipt.task_id)
    assert.deepStrictEqual(await rowOf(schema, "lifecycle", receipt.task_id), before, "the row is unchanged")
    const toCancel = jsonOutput(Receipt, other)

    const queuedView = jsonOutput(TaskView, await pg("read", receiptArgs(receipt)))
    assert.strictEqual(queuedView.state, "queued")
    assert.strictEqual(queuedView.client_request_id, ClientRequestId.make("job-1"))
    assert.deepStrictEqual(queuedView.attempts, [])

    const cancelled = await pg("cancel", receiptArgs(toCancel))
    assert.deepStrictEqual(jsonOutput(CancelOutcome, cancelled), {
      task_id: toCancel.task_id,
      cancelled: true,
      cancel_requested: false,
      state: "cancelled"
    })

    // One pass with the built-in echo provider: the queued task runs, the cancelled one does not.
    const pass = jsonOutput(PassReport, await pg("worker", ["--root", tempDir()]))
    assert.deepStrictEqual(pass.dispatched, [receipt.task_id])

    const [done, gone] = await Promise.all([
      pg("read", receiptArgs(receipt)),
      pg("read", receiptArgs(toCancel))
    ])
    const view = jsonOutput(TaskView, done)
    assert.strictEqual(view.state, "complete")
    assert.deepStrictEqual(view.result, { echo: { message: "hello", n: 1 }, provider: "fake-echo" })
    assert.deepStrictEqual(
      view.attempts.map((attempt) => [attempt.attempt, attempt.outcome]),
      [[1, "complete"]]
    )
    const cancelledView = jsonOutput(TaskView, gone)
    assert.strictEqual(cancelledView.state, "cancelled")
    assert.deepStrictEqual(cancelledView.attempts, [])

    // The same receipt once the task is done: submit stays idempotent after the work.
    assert.strictEqual((await pg("submit", ["--id", "job-1", "--payload", payload])).stdout, first.stdout)
    assert.deepStrictEqual(jsonOutput(CheckOutput, await pg("check")), {
      ok: true,
      records: 2,
      states: { queued: 0, running: 0, complete: 1, failed: 0, cancelled: 1 },
      invalid_records: []
    })
  })

  it("RELAYKEEP_STORE, RELAYKEEP_PG_SCHEMA and RELAYKEEP_QUEUE choose the same queue as the flags", async () => {
    const env = {
      RELAYKEEP_STORE: url,
      RELAYKEEP_PG_SCHEMA: schema,
      RELAYKEEP_QUEUE: "by-env",
      RELAYKEEP_ROOT: tempDir()
    }
    const submitted = await relaykeep(["submit", "--id", "env-1", "--payload", '{"via":"env"}'], { env })
    const receipt = jsonOutput(Receipt, submitted)
    assert.strictEqual((await rowOf(schema, "by-env", receipt.task_id))?.state, "queued")

    const [viaFlags, listed] = await Promise.all([
      onPg(schema, "by-env")("read", receiptArgs(receipt)),
      relaykeep(["list"], { env })
    ])
    assert.strictEqual(jsonOutput(TaskView, viaFlags).state, "queued")
    assert.deepStrictEqual(
      jsonOutput(ListOutput, listed).tasks.map((task) => task.task_id),
      [receipt.task_id]
    )
    const pass = jsonOutput(PassReport, await relaykeep(["worker"], { env }))
    assert.deepStrictEqual(pass.dispatched, [receipt.task_id])
    const view = jsonOutput(TaskView, await relaykeep(["read", ...receiptArgs(receipt)], { env }))
    assert.strictEqual(view.state, "complete")
  })

  it("list pages with --limit and --cursor, newest first, and filters by --state", async () => {
    const pg = onPg(schema, "paging")
    // Seeded in-process (submit through the binary is the first test's subject): several share a
    // millisecond, so the cursor's tie-break on task ids is exercised too.
    const receipts = await inQueue(schema, "paging", (store) =>
      Effect.gen(function* () {
        const made: Array<Receipt> = []
        for (const n of [1, 2, 3, 4, 5])
          made.push(
            yield* store.submit({ clientRequestId: ClientRequestId.make(`page-${n}`), payload: { n } })
          )
        for (const receipt of made.slice(0, 2)) yield* store.cancel(receipt.task_id, receipt.payload_sha256)
        return made
      })
    )
    const cancelledIds = receipts.slice(0, 2).map((receipt) => receipt.task_id)
    const queuedIds = receipts.slice(2).map((receipt) => receipt.task_id)

    const whole = jsonOutput(ListOutput, await pg("list"))
    assert.strictEqual(whole.next_cursor, null)
    assert.sameMembers(
      whole.tasks.map((task) => task.task_id),
      [...cancelledIds, ...queuedIds]
    )
    // Newest first, ties broken by task id (descending), as the cursor assumes.
    whole.tasks.forEach((task, i) => {
      const previous = whole.tasks[i - 1]
      if (previous === undefined) return
      assert.isTrue(
        previous.created_at > task.created_at ||
          (previous.created_at === task.created_at && previous.task_id > task.task_id),
        `newest first at ${i}`
      )
    })

    const pages: Array<ReadonlyArray<TaskId>> = []
    let cursor: string | null = null
    do {
      const page: typeof ListOutput.Type = jsonOutput(
        ListOutput,
        await pg("list", ["--limit", "2", ...(cursor === null ? [] : ["--cursor", cursor])])
      )
      pages.push(page.tasks.map((task) => task.task_id))
      cursor = page.next_cursor
    } while (cursor !== null && pages.length < 10)
    assert.deepStrictEqual(
      pages.map((page) => page.length),
      [2, 2, 1]
    )
    assert.deepStrictEqual(
      pages.flat(),
      whole.tasks.map((task) => task.task_id),
      "the pages are the whole list, in order, without repeats"
    )

    const [cancelled, queuedPage] = await Promise.all([
      pg("list", ["--state", "cancelled"]),
      pg("list", ["--state", "queued", "--limit", "2"])
    ])
    assert.sameMembers(
      jsonOutput(ListOutput, cancelled).tasks.map((task) => task.task_id),
      cancelledIds
    )
    const firstQueued = jsonOutput(ListOutput, queuedPage)
    assert.strictEqual(firstQueued.tasks.length, 2)
    assert.isNotNull(firstQueued.next_cursor)
    const rest = jsonOutput(
      ListOutput,
      await pg("list", ["--state", "queued", "--limit", "2", "--cursor", firstQueued.next_cursor ?? ""])
    )
    assert.strictEqual(rest.next_cursor, null)
    assert.deepStrictEqual(
      [...firstQueued.tasks, ...rest.tasks].map((task) => task.task_id),
      whole.tasks.filter((task) => task.state === "queued").map((task) => task.task_id)
    )
    assert.sameMembers(
      [...firstQueued.tasks, ...rest.tasks].map((task) => task.task_id),
      queuedIds
    )
  })

  it("check counts a running task; recover reaps it once its lease (held by another machine) expired", async () => {
    const pg = onPg(schema, "recover")
    const receipt = jsonOutput(Receipt, await pg("submit", ["--id", "lost", "--payload", '{"n":1}']))
    // A worker on another machine claims it and vanishes: its one-millisecond lease runs out at once.
    const claimed = await inQueue(
      schema,
      "recover",
      (store) => store.claim(receipt.task_id, { workerId: "vanished-machine:777", leaseMillis: 1 }),
      { hostname: "vanished-machine", pid: 777 }
    )
    assert.isTrue(Option.isSome(claimed), "claimed in-process")
    assert.deepStrictEqual(jsonOutput(CheckOutput, await pg("check")).states, {
      queued: 0,
      running: 1,
      complete: 0,
      failed: 0,
      cancelled: 0
    })

    const report = jsonOutput(ReapReport, await pg("recover"))
    assert.deepStrictEqual(
      report.reaped.map((task) => [task.task_id, task.reason, task.worker_id, task.state]),
      [[receipt.task_id, "lease_expired", "vanished-machine:777", "failed"]]
    )
    const view = jsonOutput(TaskView, await pg("read", receiptArgs(receipt)))
    assert.strictEqual(view.state, "failed")
    assert.strictEqual(view.error?.tag, "worker_lost")
  })

  it("worker --watch --poll 60s wakes through LISTEN/NOTIFY for a task submitted later, and exits 0 on SIGTERM", async () => {
    const pg = onPg(schema, "watch")
    const first = jsonOutput(Receipt, await pg("submit", ["--id", "before", "--payload", '{"n":1}']))
    const worker = startWorker(tempDir(), [
      "--store",
      url,
      "--pg-schema",
      schema,
      "--queue",
      "watch",
      "--root",
      tempDir(),
      "--poll",
      "60s",
      "--grace",
      "5s",
      "--log-format",
      "json"
    ])
    const stateOf = async (taskId: string) => (await rowOf(schema, "watch", taskId))?.state
    const completeWithin = async (taskId: string, millis: number) => {
      const deadline = Date.now() + millis
      while (Date.now() < deadline) {
        if ((await stateOf(taskId)) === "complete") return true
        await delay(200)
      }
      return false
    }
    // The first task done means the worker's first look is over; it then sleeps until woken.
    assert.isTrue(await completeWithin(first.task_id, 60_000), "the task queued before the start ran")
    // Past the look that follows a finished attempt, so that only a wake-up (or the poll) finds the next.
    await delay(2000)
    const second = jsonOutput(Receipt, await pg("submit", ["--id", "after", "--payload", '{"n":2}']))
    // The next poll is about 55 s away: done before 30 s means a notification woke the worker.
    assert.isTrue(
      await completeWithin(second.task_id, 30_000),
      "a task submitted while the worker slept ran long before its 60 s poll"
    )

    assert.isUndefined(worker.exit(), "still running until told to stop")
    const exit = await stopWorker(worker, 20_000)
    assert.deepStrictEqual(exit, { code: 0, signal: null }, "SIGTERM ends the worker cleanly")
  })

  it("queues in one schema keep their tasks apart; the same --id in two queues is two tasks", async () => {
    const a = onPg(schema, "a")
    const b = onPg(schema, "b")
    const [inA, inB] = await Promise.all([
      a("submit", ["--id", "same", "--payload", '{"x":1}']),
      b("submit", ["--id", "same", "--payload", '{"x":1}'])
    ])
    const receiptA = jsonOutput(Receipt, inA)
    const receiptB = jsonOutput(Receipt, inB)
    assert.notStrictEqual(receiptA.task_id, receiptB.task_id, "each queue has its own key")
    assert.strictEqual(receiptA.payload_sha256, receiptB.payload_sha256)
    const onlyB = jsonOutput(Receipt, await b("submit", ["--id", "only-b", "--payload", '{"x":2}']))

    const [listA, listB, crossRead] = await Promise.all([
      a("list"),
      b("list"),
      b("read", receiptArgs(receiptA))
    ])
    assert.deepStrictEqual(
      jsonOutput(ListOutput, listA).tasks.map((task) => task.task_id),
      [receiptA.task_id]
    )
    assert.sameMembers(
      jsonOutput(ListOutput, listB).tasks.map((task) => task.task_id),
      [receiptB.task_id, onlyB.task_id]
    )
    assert.include(failureOutput(crossRead, 1, "UnknownTask"), receiptA.task_id)

    // A worker on queue a runs a's task only.
    const pass = jsonOutput(PassReport, await a("worker", ["--root", tempDir()]))
    assert.deepStrictEqual(pass.dispatched, [receiptA.task_id])
    assert.strictEqual((await rowOf(schema, "b", receiptB.task_id))?.state, "queued")
  })

  it("first use creates the tables, and records every migration, in the chosen schema and nowhere else", async () => {
    const own = newSchema()
    assert.deepStrictEqual(await tableNames(own), [], "nothing before the first use")
    const publicBefore = await tableNames("public")
    jsonOutput(ListOutput, await onPg(own, "default")("list"))
    assert.deepStrictEqual(await tableNames(own), ["migrations", "queues", "tasks", "workers"])
    const versions = await pgQuery<{ readonly migration_id: number }>(
      `SELECT migration_id FROM "${own}".migrations ORDER BY migration_id`
    )
    assert.deepStrictEqual(
      versions.map((row) => row.migration_id),
      Array.from({ length: SchemaVersion }, (_, n) => n + 1)
    )
    assert.deepStrictEqual(await tableNames("public"), publicBefore, "public is left alone")
    for (const table of ["migrations", "queues", "tasks", "workers", "effect_sql_migrations"])
      assert.notInclude(publicBefore, table)

    // A second process finds the schema current and runs nothing again.
    jsonOutput(Receipt, await onPg(own, "default")("submit", ["--id", "x", "--payload", "{}"]))
    const again = await pgQuery<{ readonly n: string }>(`SELECT count(*) AS n FROM "${own}".migrations`)
    assert.strictEqual(again[0]?.n, String(SchemaVersion))
  })

  it("usage errors exit 2 and name the flag or variable, before anything connects", async () => {
    const root = tempDir()
    const noEnvStore = { RELAYKEEP_STORE: "", RELAYKEEP_ROOT: root }
    const submitWith = (args: ReadonlyArray<string>, env: Readonly<Record<string, string>> = noEnvStore) =>
      relaykeep(["submit", "--id", "u", "--payload", "{}", ...args], { env })
    const badSchemas = ["Upper", `a${"b".repeat(63)}`]
    const badQueues = ["-lead", "has space"]
    const cases: ReadonlyArray<readonly [Promise<Awaited<ReturnType<typeof relaykeep>>>, string]> = [
      [submitWith(["--store", "bogus"]), "--store"],
      [submitWith([], { ...noEnvStore, RELAYKEEP_STORE: "mysql://x" }), "RELAYKEEP_STORE"],
      [submitWith(["--pg-schema", "ok_name"]), "--pg-schema"],
      [submitWith(["--queue", "q"]), "--queue"],
      ...badSchemas.map(
        (name) => [submitWith(["--store", url, "--pg-schema", name]), "--pg-schema"] as const
      ),
      ...badQueues.map(
        (name) => [submitWith(["--store", url, "--pg-schema", schema, "--queue", name]), "--queue"] as const
      )
    ]
    const results = await Promise.all(cases.map(([result]) => result))
    results.forEach((result, i) => {
      const flag = cases[i]?.[1] ?? ""
      const message = failureOutput(result, 2, "InvalidInput")
      assert.isTrue(message.startsWith(`${flag}: `), `names ${flag}: ${message}`)
    })
    const created = await pgQuery<{ readonly nspname: string }>(
      "SELECT nspname FROM pg_namespace WHERE nspname = ANY($1)",
      [badSchemas.map((name) => name.toLowerCase())]
    )
    assert.deepStrictEqual(created, [], "no schema was created for a refused name")
  })

  it("an unreachable server is a StorageError (exit 1) that names the server but not the password", async () => {
    const results = await unreachable
    assert.strictEqual(results.length, 2)
    for (const result of results) {
      const message = failureOutput(result, 1, "StorageError")
      assert.include(message, "127.0.0.1:1")
      assert.notInclude(result.stderr, "hunter2")
      assert.notInclude(result.stdout, "hunter2")
    }
  })
})
