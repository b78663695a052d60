/**
 * The PostgreSQL store's connections: LISTEN/NOTIFY between store instances (each with a pool
 * of its own, as separate processes), a listening connection that dies and is opened again,
 * and a database that goes away for a moment (cut connections, refused connections) or for
 * longer than the store rides out.
 *
 * The database "goes away" through a TCP proxy in this process (test/support/pgProxy.ts), so
 * that only this file's connections are cut, however many other suites share the server.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Data, Duration, Effect, Exit, Option, Queue, Stream } from "effect"
import pg from "pg"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import { pgAvailable, pgQuery, pgStoreAt, pgUrl, scopedSchema } from "../support/pg.js"
import type { Proxy } from "../support/pgProxy.js"
import { storeVia, tcpProxy } from "../support/pgProxy.js"

const id = (text: string) => ClientRequestId.make(text)
/** What a test waited for and did not see. */
class Unmet extends Data.TaggedError("Unmet")<{ readonly message: string }> {}
const worker = { workerId: "w1", leaseMillis: 60_000 }

/** How an effect ended badly, for a message: a defect is not a typed error, and says so. */
const describeCause = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause)
  const inner =
    typeof error === "object" && error !== null && "cause" in error && error.cause instanceof Error
      ? ` (${error.cause.message})`
      : ""
  return `${Cause.isDie(cause) ? "died with the defect" : "failed with"} ${String(error)}${inner}`
}

/** `operation`, with any failure or defect turned into a failure that names it. */
const mustSucceed = <A, E>(what: string, operation: Effect.Effect<A, E>) =>
  Effect.catchAllCause(operation, (cause) =>
    Effect.fail(new Unmet({ message: `${what} ${describeCause(cause)}` }))
  )

/** Everything `stream` emits, in a queue, for as long as the test's scope lasts. */
const collect = <A>(stream: Stream.Stream<A>) =>
  Effect.gen(function* () {
    const queue = yield* Queue.unbounded<A>()
    yield* Effect.forkScoped(Stream.runForEach(stream, (item) => Queue.offer(queue, item)))
    return queue
  })

/** The next item of `queue`, or a failure saying what did not arrive. */
const next = <A>(queue: Queue.Queue<A>, what: string, seconds = 15) =>
  Queue.take(queue).pipe(
    Effect.timeoutFail({
      duration: Duration.seconds(seconds),
      onTimeout: () => new Unmet({ message: `no ${what} within ${seconds} s` })
    })
  )

/**
 * Write (with `write`, which must write every time) until the listener's `changes` report `taskId`: then it listens, and
 * nothing else is on its way (the changes of one connection arrive in order).
 */
const untilHeard = (changes: Queue.Queue<TaskId>, taskId: TaskId, write: Effect.Effect<unknown, unknown>) =>
  Effect.gen(function* () {
    for (let attempt = 0; attempt < 60; attempt++) {
      yield* write
      const heard = yield* Queue.take(changes).pipe(
        Effect.repeat({ until: (changed) => changed === taskId }),
        Effect.timeoutOption(Duration.millis(500))
      )
      if (Option.isSome(heard)) return
    }
    return yield* new Unmet({ message: `the listener never heard of ${taskId}` })
  })

/**
 * Terminate this file's LISTEN connections, found by the ports they reach the server from (in
 * the select list, so that only the rows that match are terminated).
 */
const killListeners = (proxy: Proxy) =>
  Effect.promise(() =>
    pgQuery<{ readonly pid: number; readonly killed: boolean }>(
      `SELECT pid, pg_terminate_backend(pid) AS killed FROM pg_stat_activity
       WHERE application_name = 'relaykeep listen' AND client_port = ANY($1)`,
      [proxy.upstreamPorts()]
    )
  )

/**
 * A listening store and a writing store on a fresh schema, and the listener's wake-ups, past the
 * first one (which says the connection listens: anything sent before was missed).
 */
const listenerAndWriter = Effect.gen(function* () {
  const schema = yield* scopedSchema
  const listener = yield* pgStoreAt(schema, { hostname: "listener" })
  const writer = yield* pgStoreAt(schema, { hostname: "writer" })
  const wakeups = yield* collect(listener.wakeups)
  yield* next(wakeups, "wake-up for listening")
  return { listener, writer, wakeups }
})

describe.skipIf(!pgAvailable)("PostgreSQL store: LISTEN/NOTIFY between instances", () => {
  it.scopedLive("a submission and a requeue by another instance wake a listener; a claim does not", () =>
    Effect.gen(function* () {
      const { listener, writer, wakeups } = yield* listenerAndWriter
      const receipt = yield* writer.submit({ clientRequestId: id("t"), payload: { n: 1 } })
      yield* next(wakeups, "wake-up for the submission")
      const changes = yield* collect(listener.changes)
      // Two attempts, so that a release queues it again rather than failing it.
      const retry = { max_attempts: 2, backoff_initial_ms: 0, backoff_max_ms: 0 }
      const claimed = yield* writer.claim(receipt.task_id, { ...worker, retry })
      if (Option.isNone(claimed)) return assert.fail("not claimed")
      // The claim's own notice reached the listener, yet it woke nobody: nothing new to claim.
      yield* untilHeard(
        changes,
        receipt.task_id,
        writer.heartbeat(receipt.task_id, claimed.value.lease, 60_000)
      )
      yield* Effect.sleep(Duration.millis(300))
      assert.strictEqual(yield* Queue.size(wakeups), 0, "no wake-up for a claim or a heartbeat")
      assert.strictEqual(yield* writer.release(receipt.task_id, claimed.value.lease), "queued")
      yield* next(wakeups, "wake-up for the requeue")
    })
  )

  it.scopedLive("a capped claim that locked rows it did not take tells the others to look again", () =>
    Effect.gen(function* () {
      const { listener, writer, wakeups } = yield* listenerAndWriter
      const claude = yield* writer.submit({
        clientRequestId: id("c"),
        payload: { provider: "claude", prompt: "a" }
      })
      yield* next(wakeups, "wake-up for the first submission")
      const codex = yield* writer.submit({
        clientRequestId: id("x"),
        payload: { provider: "codex", prompt: "b" }
      })
      yield* next(wakeups, "wake-up for the second submission")
      // One slot, claude capped: the claude part locks the claude task, the part for every other
      // provider locks the codex task, and the round takes only the older, claude's.
      const capped = yield* writer.claimNext({ ...worker, limit: 1, room: new Map([["claude", 1]]) })
      assert.deepStrictEqual(
        capped.claimed.map((claimed) => claimed.record.task_id),
        [claude.task_id]
      )
      yield* next(wakeups, "wake-up for the task the capped claim locked and left")
      // Without caps a round locks only what it takes: the codex task's claim wakes nobody.
      const changes = yield* collect(listener.changes)
      const plain = yield* writer.claimNext({ ...worker, limit: 1 })
      const running = plain.claimed[0]
      if (running === undefined) return assert.fail("the codex task was not claimed")
      assert.strictEqual(running.record.task_id, codex.task_id)
      yield* untilHeard(changes, codex.task_id, writer.heartbeat(codex.task_id, running.lease, 60_000))
      yield* Effect.sleep(Duration.millis(300))
      assert.strictEqual(yield* Queue.size(wakeups), 0, "no wake-up for an uncapped claim")
    })
  )

  it.scopedLive("changes names the task of every write by another instance of its queue, in order", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const listener = yield* pgStoreAt(schema, { hostname: "listener" })
      const writer = yield* pgStoreAt(schema, { hostname: "writer" })
      // A running task's heartbeats: a write every time, to probe with.
      const probe = yield* writer.submit({ clientRequestId: id("probe"), payload: {} })
      const running = yield* writer.claim(probe.task_id, worker)
      if (Option.isNone(running)) return assert.fail("probe not claimed")
      const changes = yield* collect(listener.changes)
      yield* untilHeard(changes, probe.task_id, writer.heartbeat(probe.task_id, running.value.lease, 60_000))

      const task = yield* writer.submit({ clientRequestId: id("t"), payload: { n: 1 } })
      // Another queue's writes, in the middle: the listener's queue never hears of them.
      const neighbour = yield* pgStoreAt(schema, { hostname: "neighbour" }, "neighbour")
      const foreign = yield* neighbour.submit({ clientRequestId: id("t"), payload: { n: 1 } })
      yield* neighbour.cancel(foreign.task_id, foreign.payload_sha256)
      const other = yield* writer.submit({ clientRequestId: id("u"), payload: { n: 2 } })
      const claimed = yield* writer.claim(task.task_id, worker)
      if (Option.isNone(claimed)) return assert.fail("not claimed")
      const { lease } = claimed.value
      yield* writer.heartbeat(task.task_id, lease, 60_000)
      yield* writer.complete(task.task_id, lease, { ok: true })
      yield* writer.cancel(other.task_id, other.payload_sha256)
      const expected = [task.task_id, other.task_id, task.task_id, task.task_id, task.task_id, other.task_id]
      const heard: Array<TaskId> = []
      for (const _ of expected) heard.push(yield* next(changes, `change ${heard.length + 1}`))
      assert.deepStrictEqual(heard, expected)
    })
  )

  it.scopedLive("a listening connection that is killed is opened again, says so, and hears again", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const proxy = yield* tcpProxy
      const listener = yield* storeVia(proxy, schema)
      const writer = yield* pgStoreAt(schema, { hostname: "writer" })
      // A running task: its heartbeats make notices that wake nobody, so the wake-ups queue
      // holds only what the listening connection itself says.
      const receipt = yield* writer.submit({ clientRequestId: id("t"), payload: {} })
      const claimed = yield* writer.claim(receipt.task_id, worker)
      if (Option.isNone(claimed)) return assert.fail("not claimed")
      const beat = writer.heartbeat(receipt.task_id, claimed.value.lease, 60_000)
      const wakeups = yield* collect(listener.wakeups)
      yield* next(wakeups, "wake-up for listening")
      const changes = yield* collect(listener.changes)
      yield* untilHeard(changes, receipt.task_id, beat)
      assert.strictEqual(yield* Queue.size(wakeups), 0)

      const killed = yield* killListeners(proxy)
      assert.deepStrictEqual(
        killed.map((row) => row.killed),
        [true],
        "this store's one listening connection"
      )
      // Notices sent while it was down are lost: the store says "look again" once it listens.
      yield* next(wakeups, "wake-up after listening again", 30)
      yield* untilHeard(changes, receipt.task_id, beat)
      const again = yield* writer.submit({ clientRequestId: id("after"), payload: {} })
      yield* next(wakeups, "wake-up for a submission after listening again")
      assert.strictEqual(yield* next(changes, "change after listening again"), again.task_id)
    })
  )
})

describe.skipIf(!pgAvailable)("PostgreSQL store: the database goes away", () => {
  it.scopedLive(
    "a batch claim whose reply was lost after its commit, run again, returns what it claimed",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const proxy = yield* tcpProxy
        const store = yield* storeVia(proxy, schema)
        for (const i of [0, 1, 2]) yield* store.submit({ clientRequestId: id(`t${i}`), payload: { i } })
        yield* proxy.loseNextReply
        const batch = yield* mustSucceed("the claim", store.claimNext({ ...worker, limit: 2 }))
        const running = yield* Effect.promise(() =>
          pgQuery<{ readonly task_id: string }>(
            `SELECT task_id FROM "${schema}".tasks WHERE state = 'running' ORDER BY task_id`
          )
        )
        // Every task the database holds as claimed is one the worker was told of: none is stranded.
        assert.deepStrictEqual(
          batch.claimed.map((claimed) => claimed.record.task_id).sort(),
          running.map((row) => row.task_id)
        )
        assert.strictEqual(
          batch.claimed.length,
          2,
          "the two oldest, claimed by the commit whose reply was lost"
        )
        const oldest = yield* store.list({ limit: 3 })
        assert.strictEqual(oldest.tasks.filter((task) => task.state === "queued").length, 1)
      })
  )

  it.scopedLive("connections cut while the store is in use: every operation still succeeds", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const proxy = yield* tcpProxy
      const store = yield* storeVia(proxy, schema)
      const first = yield* store.submit({ clientRequestId: id("first"), payload: { n: 0 } })
      const operations: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
        ["submit", store.submit({ clientRequestId: id("second"), payload: { n: 1 } })],
        ["read", store.read(first.task_id, first.payload_sha256)],
        ["live", store.live],
        ["list", store.list({ limit: 1 })],
        ["check", store.check],
        ["claim", store.claim(first.task_id, worker)]
      ]
      for (const [name, operation] of operations) {
        yield* proxy.cut
        yield* mustSucceed(`${name} after a cut`, operation)
      }
      assert.strictEqual((yield* store.read(first.task_id, first.payload_sha256)).state, "running")

      // Cuts in the middle of a stream of submissions: each is acknowledged, none is lost or doubled.
      const submissions = yield* Effect.forEach(
        Array.from({ length: 30 }, (_, i) => i),
        (i) => store.submit({ clientRequestId: id(`burst-${i}`), payload: { i } })
      ).pipe(Effect.fork)
      for (let cut = 0; cut < 4; cut++) {
        yield* Effect.sleep(Duration.millis(40))
        yield* proxy.cut
      }
      const receipts = yield* mustSucceed("a submission among cuts", Effect.flatten(submissions.await))
      const rows = yield* Effect.promise(() =>
        pgQuery<{ readonly task_id: string }>(
          `SELECT task_id FROM "${schema}".tasks WHERE task_id = ANY($1) ORDER BY task_id`,
          [receipts.map((r) => r.task_id)]
        )
      )
      assert.deepStrictEqual(
        rows.map((row) => row.task_id),
        receipts.map((r) => r.task_id).sort()
      )
      assert.strictEqual((yield* store.check).records, 32)
    })
  )

  it.scopedLive("connections the server terminates, as in a restart: every operation still succeeds", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const proxy = yield* tcpProxy
      const store = yield* storeVia(proxy, schema)
      const first = yield* store.submit({ clientRequestId: id("first"), payload: { n: 0 } })
      // The pool's idle connections are told "terminating connection due to administrator
      // command", from a connection kept open so that the next operation follows at once.
      const admin = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const client = new pg.Client({ connectionString: pgUrl })
          await client.connect()
          return client
        }),
        (client) => Effect.promise(() => client.end())
      )
      const terminate = Effect.promise(() =>
        admin.query<{ readonly killed: boolean }>(
          `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity
           WHERE application_name = 'relaykeep' AND client_port = ANY($1)`,
          [proxy.upstreamPorts()]
        )
      ).pipe(Effect.map((result) => result.rows))
      const operations: ReadonlyArray<readonly [string, Effect.Effect<unknown, unknown>]> = [
        ["submit", store.submit({ clientRequestId: id("second"), payload: { n: 1 } })],
        ["read", store.read(first.task_id, first.payload_sha256)],
        ["claim", store.claim(first.task_id, worker)],
        ["list", store.list({ limit: 1 })]
      ]
      // Whether a statement meets a connection the server just ended, or the pool has already
      // dropped it, is a race: go round several times.
      for (const [name, operation] of [...operations, ...operations, ...operations]) {
        const killed = yield* terminate
        assert.isAtLeast(
          killed.filter((row) => row.killed).length,
          1,
          `a connection to terminate before ${name}`
        )
        yield* mustSucceed(`${name} after the server terminated its connection`, operation)
      }
      assert.strictEqual((yield* store.read(first.task_id, first.payload_sha256)).state, "running")
    })
  )

  it.scopedLive("an operation started while the database refuses connections completes once it is back", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const proxy = yield* tcpProxy
      const store = yield* storeVia(proxy, schema)
      yield* proxy.refuse
      const started = yield* Clock.currentTimeMillis
      const submit = yield* Effect.fork(store.submit({ clientRequestId: id("during"), payload: { n: 1 } }))
      yield* Effect.sleep(Duration.seconds(3))
      const early = yield* submit.poll
      if (Option.isSome(early))
        return assert.fail(
          Exit.isSuccess(early.value)
            ? "acknowledged while the database was away"
            : `gave up during the outage: ${describeCause(early.value.cause)}`
        )
      yield* proxy.accept
      const receipt = yield* mustSucceed("the submission", Effect.flatten(submit.await)).pipe(
        Effect.timeoutFail({
          duration: Duration.seconds(15),
          onTimeout: () => new Unmet({ message: "still waiting" })
        })
      )
      assert.isAtLeast((yield* Clock.currentTimeMillis) - started, 3_000)
      assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "queued")
    })
  )

  it.scopedLive(
    "an outage longer than the retry window ends in StorageError, and the store works once it is back",
    () =>
      Effect.gen(function* () {
        const schema = yield* scopedSchema
        const proxy = yield* tcpProxy
        const store = yield* storeVia(proxy, schema)
        yield* proxy.refuse
        const started = yield* Clock.currentTimeMillis
        const exit = yield* Effect.exit(store.submit({ clientRequestId: id("lost"), payload: { n: 1 } }))
        const waited = (yield* Clock.currentTimeMillis) - started
        if (Exit.isSuccess(exit)) return assert.fail("acknowledged while the database was away")
        const failure = Cause.failureOption(exit.cause)
        if (Option.isNone(failure)) return assert.fail(`not a typed error: ${describeCause(exit.cause)}`)
        const error = failure.value
        assert.strictEqual(error._tag, "StorageError")
        assert.include(error.message, `schema ${schema}`)
        // It tried for the whole window rather than giving up at the first refusal.
        assert.isAtLeast(waited, 15_000)
        yield* proxy.accept
        const receipt = yield* store.submit({ clientRequestId: id("after"), payload: { n: 2 } })
        assert.strictEqual((yield* store.read(receipt.task_id, receipt.payload_sha256)).state, "queued")
      }),
    60_000
  )
})
