/**
 * Issue 17, point 8: `claimNext` raced by eight claimers on 1,000 queued tasks, on every store.
 * On the file store and PostgreSQL each claimer is a process of its own
 * (test/support/claimRacer.ts): it loops `claimNext({ limit: k })` with k random from 1 to 8
 * and completes what it claims, reporting each claim on stdout. The memory store lives in one
 * process, so its eight claimers are fibers there, the closest real thing it has.
 *
 * The claims are checked twice over: as the claimers reported them (every task exactly once,
 * as attempt 1) and in the records (each complete, in one attempt, by the claimer that
 * reported it). claimRace.test.ts and pg.claimRace.test.ts race whole watching workers; this
 * races the store's own operation, with batches of every size up to eight.
 */
import { afterAll, afterEach, assert, describe, it } from "@effect/vitest"
import { Effect, Random, Schema } from "effect"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { Receipt, TaskRecord } from "../../src/domain/Task.js"
import { dropSchema, freshSchema, pgAvailable, pgUrl } from "../support/pg.js"
import { memoryStore, seedTasks } from "../support/stores.js"
import type { PgQueue } from "./support.js"
import {
  childEnv,
  openPgQueue,
  readPgRecords,
  readRecords,
  report,
  useChaosDirs,
  withTimeout
} from "./support.js"

const Racers = 8
const Tasks = 1_000
const MaxBatch = 8
/** A racer that has not finished by then is stuck, not slow. */
const RaceTimeoutMillis = 120_000

const here = path.dirname(fileURLToPath(import.meta.url))
const racerScript = path.join(here, "..", "support", "claimRacer.ts")

const Claim = Schema.Struct({ task_id: Schema.String, attempt: Schema.Int })
const Done = Schema.Struct({ done: Schema.Literal(true), claims: Schema.Int, batches: Schema.Int })
const Ready = Schema.Struct({ ready: Schema.Literal(true) })
const decodeLine = Schema.decodeUnknownSync(Schema.parseJson(Schema.Union(Claim, Done, Ready)))

interface RacerClaim {
  readonly task_id: string
  readonly attempt: number
  readonly racer: number
}

/**
 * The race's invariant: every expected task claimed exactly once, as attempt 1, and every
 * record complete after that one attempt, with the result of the racer that claimed it.
 */
const assertClaimedOnceEach = (
  claims: ReadonlyArray<RacerClaim>,
  expected: ReadonlyArray<string>,
  records: ReadonlyArray<TaskRecord>
) => {
  const counts = new Map<string, number>()
  for (const claim of claims) counts.set(claim.task_id, (counts.get(claim.task_id) ?? 0) + 1)
  assert.deepStrictEqual(
    [...counts].filter(([, count]) => count > 1),
    [],
    "no task claimed twice"
  )
  assert.deepStrictEqual(
    claims.filter((claim) => claim.attempt !== 1),
    [],
    "every claim is a first attempt"
  )
  assert.deepStrictEqual([...counts.keys()].sort(), [...expected].sort(), "every task claimed")
  const claimer = new Map(claims.map((claim) => [claim.task_id, claim.racer] as const))
  assert.strictEqual(records.length, expected.length)
  for (const record of records) {
    const id = record.task_id
    assert.strictEqual(record.state, "complete", id)
    assert.strictEqual(record.attempt, 1, id)
    assert.strictEqual(record.attempts.length, 1, id)
    assert.strictEqual(record.attempts[0]?.outcome, "complete", id)
    assert.isNull(record.lease, id)
    assert.deepStrictEqual(record.result, { racer: claimer.get(id), payload: record.payload }, id)
  }
  const perRacer = Array.from(
    { length: Racers },
    (_, racer) => claims.filter((claim) => claim.racer === racer).length
  )
  // A race needs at least two runners: had one claimer taken everything, nothing was raced.
  assert.isAtLeast(
    perRacer.filter((count) => count > 0).length,
    2,
    `more than one claimer took part: ${JSON.stringify(perRacer)}`
  )
  return perRacer
}

interface Racer {
  readonly ready: Promise<void>
  readonly start: () => void
  /** Its claims, once it has exited 0 after its `done` line. */
  readonly finished: Promise<ReadonlyArray<RacerClaim>>
  readonly kill: () => void
}

const running = new Set<Racer>()
afterEach(() => {
  for (const racer of running) racer.kill()
  running.clear()
})

const startRacer = (racer: number, storeArgs: ReadonlyArray<string>): Racer => {
  const child = spawn(process.execPath, ["--import", "tsx", racerScript, String(racer), ...storeArgs], {
    env: childEnv(),
    stdio: ["pipe", "pipe", "pipe"]
  })
  let stdout = ""
  let stderr = ""
  let isReady = false
  let readied: () => void = () => undefined
  let notReady: (error: Error) => void = () => undefined
  const ready = new Promise<void>((resolve, reject) => {
    readied = resolve
    notReady = reject
  })
  child.stdout.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8")
    if (!isReady && stdout.startsWith(`{"ready":true}\n`)) {
      isReady = true
      readied()
    }
  })
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
  const finished = new Promise<ReadonlyArray<RacerClaim>>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (code, signal) => {
      if (!isReady) notReady(new Error(`racer ${racer} ended before it was ready: ${stderr}`))
      if (code !== 0) return reject(new Error(`racer ${racer} exited with ${code ?? signal}: ${stderr}`))
      const lines = stdout
        .split("\n")
        .filter((text) => text !== "")
        .map((text) => decodeLine(text))
      const claims = lines.flatMap((decoded) =>
        "task_id" in decoded ? [{ task_id: decoded.task_id, attempt: decoded.attempt, racer }] : []
      )
      const done = lines.at(-1)
      if (done === undefined || !("done" in done) || done.claims !== claims.length)
        return reject(new Error(`racer ${racer} did not end with its count: ${stdout.slice(-500)}`))
      resolve(claims)
    })
  })
  // Awaited by the race; a racer killed after a failed assertion must not fail the run again.
  finished.catch(() => undefined)
  ready.catch(() => undefined)
  const handle: Racer = {
    ready,
    start: () => child.stdin.end("go\n"),
    finished,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
    }
  }
  running.add(handle)
  return handle
}

/** Start the racers, wait until every one has opened the store, start them at once, collect. */
const race = async (storeArgs: ReadonlyArray<string>) => {
  const racers = Array.from({ length: Racers }, (_, racer) => startRacer(racer, storeArgs))
  const ready = await withTimeout(Promise.all(racers.map((racer) => racer.ready)), RaceTimeoutMillis)
  assert.isDefined(ready, "every racer opened the store")
  const started = Date.now()
  for (const racer of racers) racer.start()
  const claims = await withTimeout(Promise.all(racers.map((racer) => racer.finished)), RaceTimeoutMillis)
  if (claims === undefined) return assert.fail(`the racers did not finish in ${RaceTimeoutMillis} ms`)
  return { claims: claims.flat(), raceMillis: Date.now() - started }
}

const tempDir = useChaosDirs()

describe(`claimNext race: ${Racers} claimers on ${Tasks} tasks`, { timeout: 300_000 }, () => {
  it.scoped("memory: eight fibers in one process", () =>
    Effect.gen(function* () {
      const store = yield* memoryStore()
      const receipts = yield* Effect.forEach(
        Array.from({ length: Tasks }, (_, n) => n),
        (n) => store.submit({ clientRequestId: ClientRequestId.make(`race-${n}`), payload: { n } })
      )
      const claimer = (racer: number) =>
        Effect.gen(function* () {
          const claims: Array<RacerClaim> = []
          for (;;) {
            const limit = yield* Random.nextIntBetween(1, MaxBatch + 1)
            const batch = yield* store.claimNext({ workerId: `racer-${racer}`, leaseMillis: 60_000, limit })
            if (batch.claimed.length === 0) return claims
            for (const { record, lease } of batch.claimed) {
              claims.push({ task_id: record.task_id, attempt: lease.attempt, racer })
              // A yield between claims and completions, so that the fibers interleave.
              yield* Effect.yieldNow()
              yield* store.complete(record.task_id, lease, { racer, payload: record.payload })
            }
          }
        }).pipe(Effect.withRandom(Random.make(racer)))
      const claims = yield* Effect.all(
        Array.from({ length: Racers }, (_, racer) => claimer(racer)),
        { concurrency: "unbounded" }
      )
      const expected = receipts.map((receipt) => receipt.task_id)
      const records = yield* Effect.forEach(expected, (id) => store.record(id))
      const perRacer = assertClaimedOnceEach(claims.flat(), expected, records)
      report("claimNextRace.memory", { claims_per_racer: perRacer })
    })
  )

  it("file store: eight processes", async () => {
    const root = path.join(tempDir(), "root")
    const began = Date.now()
    const receipts = await seedTasks(
      root,
      Array.from({ length: Tasks }, (_, n) => ({ id: `race-${n}`, payload: { n } }))
    )
    const seeded = Date.now()
    const { claims, raceMillis } = await race(["--root", root])
    const expected = receipts.map((receipt) => receipt.task_id)
    const perRacer = assertClaimedOnceEach(claims, expected, readRecords(root))
    report("claimNextRace.file", {
      seed_ms: seeded - began,
      race_ms: raceMillis,
      total_ms: Date.now() - began,
      claims_per_racer: perRacer
    })
  })

  describe.skipIf(!pgAvailable)("PostgreSQL", () => {
    const schema = freshSchema()
    let queue: PgQueue | undefined
    afterAll(async () => {
      await queue?.close()
      await dropSchema(schema)
    })

    it("eight processes", async () => {
      const began = Date.now()
      const opened = await openPgQueue(schema)
      queue = opened
      // Sixteen submissions in flight: seeding is not what this test is about.
      const receipts: Array<Receipt> = []
      let next = 0
      const lane = async () => {
        while (next < Tasks) {
          const n = next++
          receipts.push(await opened.submit(`race-${n}`, { n }))
        }
      }
      await Promise.all(Array.from({ length: 16 }, lane))
      assert.strictEqual(receipts.length, Tasks)
      const seeded = Date.now()
      const { claims, raceMillis } = await race(["--pg", pgUrl ?? "", schema])
      const expected = receipts.map((receipt) => receipt.task_id)
      const perRacer = assertClaimedOnceEach(claims, expected, await readPgRecords(schema))
      assert.strictEqual(await opened.live(), 0)
      report("claimNextRace.pg", {
        schema,
        seed_ms: seeded - began,
        race_ms: raceMillis,
        total_ms: Date.now() - began,
        claims_per_racer: perRacer
      })
    })
  })
})
