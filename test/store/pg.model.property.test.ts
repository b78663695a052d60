/**
 * The PostgreSQL store against the pure model: random sequences of worker and client
 * operations run on a PostgreSQL store and on the memory store, which applies the pure
 * transitions of `domain/transitions.ts` to plain records and nothing else. After every step
 * both must have answered the same and must hold the same record for every task.
 *
 * The PostgreSQL store writes most transitions in one fenced statement and claims in one
 * statement; this is what keeps those statements meaning what the pure functions mean.
 *
 * Both stores see the same clock (set by hand, so leases expire when the sequence says) and
 * the same random draws for each step (backoff jitter). They have different secrets and draw
 * different lease tokens, so task ids and tokens are mapped from the PostgreSQL side to the
 * memory side before comparing.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Duration } from "effect"
import { Clock, Effect, Either, FastCheck as fc, Random } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import type { Lease, RetryPolicy } from "../../src/domain/Task.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { pgAvailable, pgStoreAt, scopedSchema } from "../support/pg.js"
import { memoryStore } from "../support/stores.js"

const Keys = 3
const LeaseMillis = 1_000
const retry: RetryPolicy = { max_attempts: 3, backoff_initial_ms: 200, backoff_max_ms: 800 }
const worker = { workerId: "w", leaseMillis: LeaseMillis, retry }

type Op =
  | { readonly op: "submit"; readonly key: number; readonly provider: "echo" | "claude"; readonly n: number }
  | { readonly op: "claimNext"; readonly limit: number; readonly claudeRoom: number | undefined }
  | { readonly op: "tick"; readonly millis: number }
  | {
      readonly op:
        | "claim"
        | "heartbeat"
        | "recordProcess"
        | "complete"
        | "failRetryable"
        | "failFinal"
        | "stopCancelled"
        | "cancel"
        | "reap"
        | "reapDead"
        | "release"
        | "staleComplete"
        | "staleHeartbeat"
      readonly key: number
    }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("submit" as const),
      key: fc.nat(Keys - 1),
      provider: fc.constantFrom("echo" as const, "claude" as const),
      n: fc.nat(1)
    })
  },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant("claimNext" as const),
      limit: fc.integer({ min: 0, max: 3 }),
      claudeRoom: fc.option(fc.nat(2), { nil: undefined })
    })
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("tick" as const), millis: fc.nat(1_500) }) },
  {
    weight: 8,
    arbitrary: fc.record({
      op: fc.constantFrom(
        "claim" as const,
        "heartbeat" as const,
        "recordProcess" as const,
        "complete" as const,
        "failRetryable" as const,
        "failFinal" as const,
        "stopCancelled" as const,
        "cancel" as const,
        "reap" as const,
        "reapDead" as const,
        "release" as const,
        "staleComplete" as const,
        "staleHeartbeat" as const
      ),
      key: fc.nat(Keys - 1)
    })
  }
)

const byOther = ["cancel", "reap", "reapDead", "staleComplete", "staleHeartbeat"] as const
const byWorker = [
  "heartbeat",
  "recordProcess",
  "complete",
  "failRetryable",
  "failFinal",
  "stopCancelled",
  "release"
] as const

/**
 * Another process's write and then the worker's on the same task: the interleaving that a
 * one-statement write must fence, drawn often rather than left to chance.
 */
const raceArb: fc.Arbitrary<ReadonlyArray<Op>> = fc
  .record({
    key: fc.nat(Keys - 1),
    first: fc.constantFrom(...byOther),
    then: fc.constantFrom(...byWorker)
  })
  .map(({ key, first, then }) => [
    { op: first, key },
    { op: then, key }
  ])

const opsArb: fc.Arbitrary<Array<Op>> = fc
  .array(fc.oneof({ weight: 4, arbitrary: opArb.map((op) => [op]) }, { weight: 1, arbitrary: raceArb }), {
    minLength: 5,
    maxLength: 40
  })
  .map((chunks) => chunks.flat())

const raceExample: Array<Op> = [
  { op: "submit", key: 0, provider: "echo", n: 0 },
  { op: "claimNext", limit: 1, claudeRoom: undefined },
  { op: "cancel", key: 0 },
  { op: "heartbeat", key: 0 }
]

/** A clock that stands still until the sequence moves it; sleeps (retries, timeouts) are real. */
const manualClock = (start: number) => {
  let now = start
  const live = Clock.make()
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => now,
    currentTimeMillis: Effect.sync(() => now),
    unsafeCurrentTimeNanos: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
    sleep: (duration: Duration.Duration) => live.sleep(duration)
  }
  return {
    clock,
    advance: (millis: number) => {
      now += millis
    }
  }
}

/** One value per store: [memory, PostgreSQL]. */
type Pair<A> = readonly [A, A]

interface KnownTask {
  readonly ids: Pair<TaskId>
  readonly sha: string
  /** The lease of the attempt now running, on each side. */
  lease: Pair<Lease> | undefined
  /** A lease that lost the task: an earlier attempt's, or a forged one. */
  stale: Pair<Lease> | undefined
}

/** What an answer says, as plain JSON: errors by tag and message. */
const plain = (answer: Either.Either<unknown, unknown>): unknown =>
  JSON.parse(
    JSON.stringify(
      Either.match(answer, {
        onRight: (value) => ({ ok: value ?? null }),
        onLeft: (error) =>
          error instanceof Error && "_tag" in error
            ? { error: error._tag, message: error.message }
            : { error: String(error) }
      })
    )
  )

/**
 * The PostgreSQL side is three stores on one schema, as three processes would be: a worker
 * (claims and its own attempts' writes), a client and reaper (submit, cancel, reap, stale
 * writes), and an observer that reads the records after each step. Each remembers what it
 * last read or wrote, so the worker's writes often start from a record the others changed.
 */
interface PgSide {
  readonly worker: TaskStoreShape
  readonly other: TaskStoreShape
  readonly observer: TaskStoreShape
}

const OtherOps: ReadonlySet<Op["op"]> = new Set([
  "submit",
  "cancel",
  "reap",
  "reapDead",
  "staleComplete",
  "staleHeartbeat"
])

const runSequence = (memory: TaskStoreShape, postgres: PgSide, ops: ReadonlyArray<Op>) =>
  Effect.gen(function* () {
    const time = manualClock(Date.UTC(2026, 0, 1))
    const known = new Map<number, KnownTask>()
    /** PostgreSQL's task ids and tokens, and the memory store's that correspond to them. */
    const renames = new Map<string, string>()
    const normalize = (value: unknown): unknown => {
      let text = JSON.stringify(value)
      for (const [from, to] of renames) text = text.replaceAll(from, to)
      return JSON.parse(text)
    }
    const rememberLease = (pair: Pair<Lease>) => renames.set(pair[1].owner_token, pair[0].owner_token)

    for (const [index, step] of ops.entries()) {
      // Both stores at the same moment with the same random draws; each step a moment later,
      // so that submissions have distinct times and so one order on both sides.
      time.advance(1)
      const onBoth = <A, E>(
        run: (store: TaskStoreShape, side: 0 | 1) => Effect.Effect<A, E>,
        pg: TaskStoreShape = OtherOps.has(step.op) ? postgres.other : postgres.worker
      ) =>
        Effect.all([
          Effect.either(run(memory, 0)).pipe(Effect.withRandom(Random.make(index))),
          Effect.either(run(pg, 1)).pipe(Effect.withRandom(Random.make(index)))
        ]).pipe(Effect.withClock(time.clock))
      const agree = (answers: Pair<Either.Either<unknown, unknown>>) =>
        assert.deepStrictEqual(
          normalize(plain(answers[1])),
          plain(answers[0]),
          `step ${index} (${JSON.stringify(step)}): the answers differ`
        )
      const task = "key" in step ? known.get(step.key) : undefined

      switch (step.op) {
        case "tick":
          time.advance(step.millis)
          break
        case "submit": {
          const answers = yield* onBoth((store) =>
            store.submit({
              clientRequestId: ClientRequestId.make(`k${step.key}`),
              payload: { provider: step.provider, n: step.n }
            })
          )
          const [mine, theirs] = answers
          if (task === undefined && Either.isRight(mine) && Either.isRight(theirs)) {
            renames.set(theirs.right.task_id, mine.right.task_id)
            known.set(step.key, {
              ids: [mine.right.task_id, theirs.right.task_id],
              sha: mine.right.payload_sha256,
              lease: undefined,
              stale: undefined
            })
          }
          agree(answers)
          break
        }
        case "claimNext": {
          const request = {
            ...worker,
            limit: step.limit,
            room: step.claudeRoom === undefined ? undefined : new Map([["claude", step.claudeRoom]])
          }
          // The waiting tasks are promised in full only when the batch did not fill up: a
          // full batch reports those it met on the way, which depends on how a store looks.
          // `queued` and `busy` are hints a store gives when it can, not part of the meaning.
          const answers = yield* onBoth((store) =>
            Effect.map(store.claimNext(request), (batch) =>
              batch.claimed.length < request.limit
                ? {
                    claimed: batch.claimed,
                    invalid: batch.invalid,
                    waiting: batch.waiting,
                    next_due_at: batch.next_due_at
                  }
                : { claimed: batch.claimed, invalid: batch.invalid }
            )
          )
          const [mine, theirs] = answers
          if (Either.isRight(mine) && Either.isRight(theirs)) {
            for (const [at, claimed] of mine.right.claimed.entries()) {
              const other = theirs.right.claimed[at]
              if (other !== undefined) rememberLease([claimed.lease, other.lease])
            }
          }
          agree(answers)
          break
        }
        case "claim": {
          if (task === undefined) break
          const answers = yield* onBoth((store, side) => store.claim(task.ids[side], worker))
          const [mine, theirs] = answers
          if (Either.isRight(mine) && Either.isRight(theirs) && mine.right._tag === "Some")
            if (theirs.right._tag === "Some")
              rememberLease([mine.right.value.lease, theirs.right.value.lease])
          agree(answers)
          break
        }
        case "cancel": {
          if (task === undefined) break
          agree(yield* onBoth((store, side) => store.cancel(task.ids[side], task.sha)))
          break
        }
        case "staleComplete":
        case "staleHeartbeat": {
          const lease = task?.stale ?? task?.lease
          if (task === undefined || lease === undefined) break
          // With no earlier attempt, a forged token on the current one.
          const fenced: Pair<Lease> =
            task.stale === undefined
              ? [
                  { ...lease[0], owner_token: "forged" },
                  { ...lease[1], owner_token: "forged" }
                ]
              : lease
          agree(
            yield* onBoth((store, side): Effect.Effect<unknown, unknown> =>
              step.op === "staleComplete"
                ? store.complete(task.ids[side], fenced[side], { stale: true })
                : store.heartbeat(task.ids[side], fenced[side], LeaseMillis)
            )
          )
          break
        }
        default: {
          const lease = task?.lease
          if (task === undefined || lease === undefined) break
          agree(
            yield* onBoth((store, side): Effect.Effect<unknown, unknown> => {
              const [taskId, held] = [task.ids[side], lease[side]]
              switch (step.op) {
                case "heartbeat":
                  return store.heartbeat(taskId, held, LeaseMillis)
                case "recordProcess":
                  return store.recordProcess(taskId, held, 7_000 + index)
                case "complete":
                  return store.complete(taskId, held, { step: index })
                case "failRetryable":
                  return store.fail(taskId, held, { tag: "Flaky", message: "again", retryable: true })
                case "failFinal":
                  return store.fail(taskId, held, { tag: "Boom", message: "final" })
                case "stopCancelled":
                  return store.stopCancelled(taskId, held)
                case "reap":
                  return store.reap(taskId, held, "lease_expired")
                case "reapDead":
                  return store.reap(taskId, held, "owner_dead")
                case "release":
                  return store.release(taskId, held)
              }
              return Effect.dieMessage(`no transition for ${step.op}`)
            })
          )
        }
      }

      // Every record agrees, and the model's leases follow the records.
      for (const entry of known.values()) {
        const records = yield* onBoth((store, side) => store.record(entry.ids[side]), postgres.observer)
        agree(records)
        const [mine, theirs] = records
        if (Either.isLeft(mine) || Either.isLeft(theirs)) continue
        const [current, other] = [mine.right.lease, theirs.right.lease]
        if (current !== null && other !== null && current.owner_token !== entry.lease?.[0].owner_token) {
          if (entry.lease !== undefined) entry.stale = entry.lease
          entry.lease = [current, other]
        } else if (current === null && entry.lease !== undefined) {
          entry.stale = entry.lease
          entry.lease = undefined
        }
      }
    }
    // And the running set, which the reaper reads, holds the same tasks.
    const [mine, theirs] = yield* Effect.all([memory.running, postgres.observer.running])
    assert.deepStrictEqual(
      normalize(theirs.running.map((record) => record.task_id)),
      mine.running.map((record) => record.task_id),
      "the running sets differ at the end"
    )
  })

/** A memory store, and three PostgreSQL stores on one fresh schema. */
const stores = Effect.gen(function* () {
  const memory = yield* memoryStore()
  const schema = yield* scopedSchema
  const [worker, other, observer] = yield* Effect.all([
    pgStoreAt(schema),
    pgStoreAt(schema),
    pgStoreAt(schema)
  ])
  return { memory, postgres: { worker, other, observer } }
})

describe.skipIf(!pgAvailable)("PostgreSQL store against the pure model", () => {
  it.scopedLive.prop(
    "random operation sequences answer and record what the memory store does",
    { ops: opsArb },
    ({ ops }) => Effect.flatMap(stores, ({ memory, postgres }) => runSequence(memory, postgres, ops)),
    { timeout: 300_000, fastCheck: { numRuns: 30 } }
  )

  it.scopedLive("a worker's write after another process's cancel request keeps the request", () =>
    Effect.flatMap(stores, ({ memory, postgres }) => runSequence(memory, postgres, raceExample))
  )
})
