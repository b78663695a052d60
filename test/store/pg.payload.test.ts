/**
 * Payloads on the wire: a task's payload crosses between the PostgreSQL store and a worker once,
 * in the reply to the claim that hands the task over. A running attempt (its heartbeats, its
 * cancel poll, its outcome), the list of running tasks and reaping never carry it either way,
 * so that a large prompt costs its bytes once per attempt, not once per heartbeat.
 *
 * Black-box: the worker's store reaches the server through a recording TCP proxy
 * (test/support/pgProxy.ts), and the test looks for a random marker in the recorded bytes. The
 * wire is read as the PostgreSQL protocol only to name, in a failure, the statements that
 * carried the marker.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber } from "effect"
import { randomUUID } from "node:crypto"
import { ClientRequestId } from "../../src/domain/ids.js"
import { Host } from "../../src/services/Host.js"
import { Provider } from "../../src/services/Provider.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { runAttempt } from "../../src/worker/attempt.js"
import { reapOrphans } from "../../src/worker/reap.js"
import { pgAvailable, pgStoreAt, scopedSchema } from "../support/pg.js"
import type { Chunk, Recording } from "../support/pgProxy.js"
import { storeVia, tcpProxy } from "../support/pgProxy.js"

/** A prompt of about 32 KB with `marker` all through it. */
const longPrompt = (marker: string) =>
  Array.from(
    { length: 280 },
    (_, line) => `line ${line} of a long prompt that the worker hands to its provider: ${marker}`
  ).join("\n")

/** One message of the PostgreSQL protocol: its type byte, and what follows its length. */
interface Message {
  readonly type: string
  readonly body: Buffer
}

/** The first protocol word of a startup message (3.0), which alone has no type byte. */
const StartupCode = 196_608

/**
 * The messages of one connection's stream. A client's stream may begin with its startup
 * message; the recording may also begin between two messages of a connection already open.
 */
const messagesOf = (bytes: Buffer, fromClient: boolean): ReadonlyArray<Message> => {
  const messages: Array<Message> = []
  let at = 0
  if (fromClient && bytes.length >= 8 && bytes.readInt32BE(4) === StartupCode) {
    messages.push({ type: "startup", body: bytes.subarray(8, bytes.readInt32BE(0)) })
    at = bytes.readInt32BE(0)
  }
  while (at + 5 <= bytes.length) {
    const length = bytes.readInt32BE(at + 1)
    if (length < 4) break
    messages.push({
      type: bytes.toString("latin1", at, at + 1),
      body: bytes.subarray(at + 5, at + 1 + length)
    })
    at += 1 + length
  }
  return messages
}

/** The zero-terminated string of `body` that starts at `from`, and where the next one starts. */
const cString = (body: Buffer, from: number) => {
  const end = body.indexOf(0, from)
  return { text: body.toString("utf8", from, end < 0 ? body.length : end), next: end + 1 }
}

/**
 * What a client asked for, one request for each reply the server owes it (a startup, a simple
 * query, or the messages up to a Sync), with the statement text and whether it carried `text`.
 */
const requestsOf = (messages: ReadonlyArray<Message>, text: string) => {
  const requests: Array<{ readonly statement: string; readonly carries: boolean }> = []
  const prepared = new Map<string, string>()
  let statement = ""
  let carries = false
  const close = (what: string) => {
    requests.push({ statement: what, carries })
    carries = false
  }
  for (const message of messages) {
    carries = carries || message.body.includes(text)
    if (message.type === "startup") close("(startup)")
    else if (message.type === "Q") close(cString(message.body, 0).text)
    else if (message.type === "P") {
      const name = cString(message.body, 0)
      statement = cString(message.body, name.next).text
      prepared.set(name.text, statement)
    } else if (message.type === "B") {
      const portal = cString(message.body, 0)
      statement = prepared.get(cString(message.body, portal.next).text) ?? statement
    } else if (message.type === "S") close(statement)
  }
  return requests
}

/** For each reply the server finished (ReadyForQuery), whether it carried `text`. */
const repliesOf = (messages: ReadonlyArray<Message>, text: string) => {
  const replies: Array<boolean> = []
  let carries = false
  for (const message of messages) {
    carries = carries || message.body.includes(text)
    if (message.type === "Z") {
      replies.push(carries)
      carries = false
    }
  }
  return replies
}

const byConnection = (chunks: ReadonlyArray<Chunk>): ReadonlyMap<number, Buffer> => {
  const parts = new Map<number, Array<Buffer>>()
  for (const chunk of chunks)
    parts.set(chunk.connection, [...(parts.get(chunk.connection) ?? []), chunk.data])
  return new Map([...parts].map(([connection, data]) => [connection, Buffer.concat(data)]))
}

/**
 * The recorded traffic as statements: every statement clients sent, how many replies the
 * server finished, the statements that sent `text`, and those whose replies carried it back.
 */
const wireOf = (recording: Recording, text: string) => {
  const sent = byConnection(recording.sentChunks())
  const received = byConnection(recording.receivedChunks())
  const statements: Array<string> = []
  const sentIn: Array<string> = []
  const receivedIn: Array<string> = []
  let replies = 0
  for (const [connection, bytes] of received) {
    const answered = repliesOf(messagesOf(bytes, false), text)
    replies += answered.length
    const requests = requestsOf(messagesOf(sent.get(connection) ?? Buffer.alloc(0), true), text)
    answered.forEach((carries, index) => {
      if (carries) receivedIn.push(requests[index]?.statement ?? "(a statement not recorded)")
    })
  }
  for (const bytes of sent.values())
    for (const request of requestsOf(messagesOf(bytes, true), text)) {
      if (request.statement !== "(startup)") statements.push(request.statement)
      if (request.carries) sentIn.push(request.statement)
    }
  return { statements, replies, sentIn, receivedIn }
}

/** Statements for a message: each once, shortened, with how many times it went. */
const named = (statements: ReadonlyArray<string>) => {
  const counts = new Map<string, number>()
  for (const statement of statements) {
    const short = statement.replace(/\s+/g, " ").trim()
    const key = short.length > 220 ? `${short.slice(0, 220)}...` : short
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return counts.size === 0
    ? "statements the protocol reading could not name"
    : [...counts].map(([statement, count]) => `[${count}x] ${statement}`).join(" | ")
}

/** The host of the proxied store's leases (see storeVia), so that a reaper sees them as live. */
const proxiedHost = Host.layerTest({ hostname: "proxied" })

describe.skipIf(!pgAvailable)("PostgreSQL store: payloads on the wire", () => {
  it.scopedLive("a running attempt, the running list and reaping never carry the payload, either way", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const direct = yield* pgStoreAt(schema, { hostname: "direct" })
      const proxy = yield* tcpProxy
      const proxied = yield* storeVia(proxy, schema)
      const marker = `marker-${randomUUID()}`
      const payload = { provider: "test", prompt: longPrompt(marker) }
      assert.isAbove(JSON.stringify(payload).length, 30_000)
      const receipt = yield* direct.submit({ clientRequestId: ClientRequestId.make("big"), payload })

      const batch = yield* proxied.claimNext({ workerId: "w", leaseMillis: 900, limit: 1 })
      const claimed = batch.claimed[0]
      if (claimed === undefined) return assert.fail("the task was not claimed")
      assert.strictEqual(claimed.record.task_id, receipt.task_id)
      assert.include(String(claimed.record.payload["prompt"]), marker, "the claimed payload is intact")
      assert.deepStrictEqual(claimed.record.payload, payload, "the claimed payload is intact")
      // The claim is the one worker query that carries the payload, and the recording saw it.
      assert.isTrue(
        proxy.recording.received().includes(marker),
        "the reply to the claim carried the payload, and the recording saw it go by"
      )

      // The run takes 1.5 s, and lasts until the test has read the running list and reaped, so
      // that the task is running at every look however slow the machine.
      const looked = yield* Deferred.make<void>()
      const provider = Provider.layerTest(() =>
        Effect.as(Effect.zipRight(Effect.sleep(Duration.millis(1_500)), Deferred.await(looked)), {
          result: { ok: true }
        })
      )
      yield* proxy.recording.clear
      const attempt = yield* runAttempt(claimed, { leaseMillis: 900, cancelPollMillis: 100 }).pipe(
        Effect.provideService(TaskStore, proxied),
        Effect.provide(provider),
        Effect.fork
      )
      for (let round = 0; round < 4; round++) {
        yield* Effect.sleep(Duration.millis(250))
        const snapshot = yield* proxied.running
        assert.deepStrictEqual(
          snapshot.running.map((record) => record.task_id),
          [receipt.task_id],
          "the running list shows the attempt's task"
        )
        const reaped = yield* reapOrphans.pipe(
          Effect.provideService(TaskStore, proxied),
          Effect.provide(proxiedHost)
        )
        assert.deepStrictEqual(reaped.reaped, [], "the reaper leaves the live attempt alone")
      }
      yield* Deferred.succeed(looked, undefined)
      const report = yield* Fiber.join(attempt)
      const sent = proxy.recording.sent()
      const received = proxy.recording.received()
      const wire = wireOf(proxy.recording, marker)

      assert.strictEqual(report.end._tag, "complete")
      const done = yield* direct.read(receipt.task_id, receipt.payload_sha256)
      assert.strictEqual(done.state, "complete")
      assert.deepStrictEqual(done.result, { ok: true })

      // The attempt talked to the server all along: heartbeats every 300 ms, a cancel poll
      // every 100 ms, the running list and reaping four times each, and the outcome.
      assert.isAbove(sent.length, 1_000, "bytes the client sent during the attempt")
      assert.isAbove(received.length, 1_000, "bytes the server sent back during the attempt")
      assert.isAtLeast(wire.statements.length, 10, "statements the client sent during the attempt")
      assert.isAtLeast(wire.replies, 10, "replies the server finished during the attempt")
      assert.isAtLeast(
        wire.statements.filter((statement) => /\bUPDATE\b/i.test(statement)).length,
        3,
        `heartbeats and the outcome write, among ${named(wire.statements)}`
      )

      const leaks = [
        ...(sent.includes(marker) ? [`client to server, in the statements ${named(wire.sentIn)}`] : []),
        ...(received.includes(marker)
          ? [`server to client, in the replies to ${named(wire.receivedIn)}`]
          : [])
      ]
      assert.deepStrictEqual(
        leaks,
        [],
        `the payload went over the wire after the claim: ${leaks.join(" || ")}`
      )
    })
  )

  /**
   * A cancel from another client while the attempt runs, noticed by the cancel poll (`poll`) or
   * by a heartbeat (the poll off): the recorded statements, and whether the payload went by.
   */
  const cancelledAttempt = (noticedBy: "poll" | "heartbeat") =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const direct = yield* pgStoreAt(schema, { hostname: "direct" })
      const proxy = yield* tcpProxy
      const proxied = yield* storeVia(proxy, schema)
      const marker = `marker-${randomUUID()}`
      const payload = { provider: "test", prompt: longPrompt(marker) }
      const receipt = yield* direct.submit({ clientRequestId: ClientRequestId.make("cancelled"), payload })
      const leaseMillis = noticedBy === "heartbeat" ? 600 : 60_000
      const batch = yield* proxied.claimNext({ workerId: "w", leaseMillis, limit: 1 })
      const claimed = batch.claimed[0]
      if (claimed === undefined) return assert.fail("the task was not claimed")
      yield* proxy.recording.clear
      const started = yield* Deferred.make<void>()
      const provider = Provider.layerTest(() =>
        Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
      )
      const cancelPollMillis = noticedBy === "poll" ? 100 : 3_600_000
      const attempt = yield* runAttempt(claimed, { leaseMillis, cancelPollMillis }).pipe(
        Effect.provideService(TaskStore, proxied),
        Effect.provide(provider),
        Effect.fork
      )
      yield* Deferred.await(started)
      // Written by another client: the worker's remembered revision is out of date now.
      const asked = yield* direct.cancel(receipt.task_id, receipt.payload_sha256)
      assert.isTrue(asked.cancel_requested)
      const report = yield* Fiber.join(attempt)
      assert.strictEqual(report.end._tag, "cancelled")
      assert.strictEqual((yield* direct.read(receipt.task_id, receipt.payload_sha256)).state, "cancelled")
      const wire = wireOf(proxy.recording, marker)
      assert.isFalse(proxy.recording.sent().includes(marker), `sent in ${named(wire.sentIn)}`)
      assert.isFalse(proxy.recording.received().includes(marker), `received in ${named(wire.receivedIn)}`)
      return wire.statements
    })

  it.scopedLive(
    "a cancel noticed by a heartbeat goes down the locked fallback, still without the payload",
    () =>
      Effect.gen(function* () {
        // The heartbeat's fenced write is refused (the cancel wrote in between), so it runs its step
        // on the row under a lock, which it reads without the payload the worker holds.
        const statements = yield* cancelledAttempt("heartbeat")
        assert.isTrue(
          statements.some((statement) => /FOR UPDATE/i.test(statement)),
          `the fallback ran, among ${named(statements)}`
        )
      })
  )

  it.scopedLive(
    "a cancel noticed by the poll is written in one statement: the poll's read refreshed the worker",
    () =>
      Effect.gen(function* () {
        const statements = yield* cancelledAttempt("poll")
        assert.isFalse(
          statements.some((statement) => /FOR UPDATE/i.test(statement)),
          `no fallback, among ${named(statements)}`
        )
      })
  )

  it.scopedLive("a client's read of the finished task carries the payload, and the recording sees it", () =>
    Effect.gen(function* () {
      const schema = yield* scopedSchema
      const direct = yield* pgStoreAt(schema, { hostname: "direct" })
      const marker = `marker-${randomUUID()}`
      const receipt = yield* direct.submit({
        clientRequestId: ClientRequestId.make("big"),
        payload: { provider: "test", prompt: longPrompt(marker) }
      })
      const claimed = yield* direct.claimNext({ workerId: "w", leaseMillis: 60_000, limit: 1 })
      const running = claimed.claimed[0]
      if (running === undefined) return assert.fail("the task was not claimed")
      assert.strictEqual(yield* direct.complete(receipt.task_id, running.lease, { ok: true }), "complete")

      const proxy = yield* tcpProxy
      const proxied = yield* storeVia(proxy, schema)
      yield* proxy.recording.clear
      const view = yield* proxied.read(receipt.task_id, receipt.payload_sha256)
      assert.strictEqual(view.state, "complete")
      assert.deepStrictEqual(view.result, { ok: true })
      assert.isTrue(
        proxy.recording.received().includes(marker),
        "server to client: the reply to a client's read carried the payload, so the recording would see one go by"
      )
      assert.isNotEmpty(wireOf(proxy.recording, marker).receivedIn, "the protocol reading names the read")
    })
  )
})
