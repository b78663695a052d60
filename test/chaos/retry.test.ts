/**
 * Issue 5, requirement 14: a task that fails twice, then succeeds, ends complete after 3
 * attempts with delays inside the backoff bounds; at the limit it ends failed with every
 * attempt's error kept; an error that is not retryable ends the task after one attempt.
 * A real watching worker runs the scripted fake claude.
 */
import { assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { TaskRecord } from "../../src/domain/Task.js"
import {
  effectsOf,
  logsOf,
  scriptedPayload,
  terminate,
  useChaos,
  waitUntil,
  within
} from "./support-fence.js"

const chaos = useChaos()

// Long enough that the lower bounds (0.5 s, then 1 s) stand well above what a retry costs
// without any backoff (a look at the queue, a claim) even on a loaded machine.
const InitialMillis = 1_000
const MaxMillis = 5_000
/** Room for the worker's scheduling on a loaded machine: the gaps' upper bound is nominal + this. */
const SlackMillis = 2_000

/** The nominal wait after attempt `n` (equal jitter draws the real one from [nominal/2, nominal]). */
const nominal = (n: number) => Math.min(MaxMillis, InitialMillis * 2 ** (n - 1))

const Answer = Schema.parseJson(Schema.Struct({ task_id: Schema.String, attempt: Schema.Int }))
const answerOf = (result: unknown) =>
  Schema.decodeUnknownSync(Answer)(
    Schema.decodeUnknownSync(Schema.Struct({ text: Schema.String }))(result).text
  )

const attemptsOf = (record: TaskRecord) =>
  record.attempts.map((attempt) => ({
    attempt: attempt.attempt,
    outcome: attempt.outcome,
    tag: attempt.error?.tag,
    retryable: attempt.error?.retryable
  }))

describe("retries with backoff, real worker (14)", { timeout: 150_000 }, () => {
  it("fails twice then succeeds within the backoff bounds; fails for good at the limit; never retries what cannot succeed", async () => {
    const box = chaos()
    const receipts = await box.submit([
      { id: "third-time-lucky", payload: scriptedPayload({ fail_attempts: 2 }) },
      { id: "never", payload: scriptedPayload({ fail_attempts: 5 }) },
      // A model that looks like a flag: InvalidPayload before anything starts, not retryable.
      { id: "invalid", payload: { provider: "claude", model: "-x", prompt: "{}" } }
    ])
    const [lucky, never, invalid] = receipts.map((receipt) => receipt.task_id)
    if (lucky === undefined || never === undefined || invalid === undefined) throw new Error("no receipts")

    const worker = box.startWorker("worker", [
      "--watch",
      "--concurrency",
      "3",
      "--max-attempts",
      "3",
      "--retry-backoff",
      `${InitialMillis}ms`,
      "--retry-backoff-max",
      `${MaxMillis / 1000}s`,
      "--poll",
      "1s"
    ])
    const finalStates = { [lucky]: "complete", [never]: "failed", [invalid]: "failed" }
    const records = await waitUntil(
      "every task to end",
      () => {
        const all = [lucky, never, invalid].map((taskId) => box.record(taskId))
        return all.every((record) => record !== undefined && record.state === finalStates[record.task_id])
          ? all.flatMap((record) => (record === undefined ? [] : [record]))
          : undefined
      },
      90_000,
      () => logsOf(worker)
    )
    const [luckyRecord, neverRecord, invalidRecord] = records
    if (luckyRecord === undefined || neverRecord === undefined || invalidRecord === undefined)
      throw new Error("records missing")

    // Fails twice (retryable), then succeeds: complete after 3 attempts.
    assert.strictEqual(luckyRecord.state, "complete")
    assert.strictEqual(luckyRecord.attempt, 3)
    assert.deepStrictEqual(attemptsOf(luckyRecord), [
      { attempt: 1, outcome: "failed", tag: "ProviderFailed", retryable: true },
      { attempt: 2, outcome: "failed", tag: "ProviderFailed", retryable: true },
      { attempt: 3, outcome: "complete", tag: undefined, retryable: undefined }
    ])
    assert.deepStrictEqual(answerOf(luckyRecord.result), { task_id: lucky, attempt: 3 })
    assert.isNull(luckyRecord.error)
    // Each retry waited out its backoff: at least half the nominal delay, at most all of it
    // plus the worker's scheduling.
    for (const n of [1, 2]) {
      const ended = Date.parse(luckyRecord.attempts[n - 1]?.ended_at ?? "")
      const next = Date.parse(luckyRecord.attempts[n]?.started_at ?? "")
      const gap = next - ended
      assert.isAtLeast(gap, nominal(n) / 2, `the wait after attempt ${n}`)
      assert.isAtMost(gap, nominal(n) + SlackMillis, `the wait after attempt ${n}`)
    }

    // At the limit: failed after 3 attempts, each attempt's error kept.
    assert.strictEqual(neverRecord.state, "failed")
    assert.strictEqual(neverRecord.attempt, 3)
    assert.deepStrictEqual(attemptsOf(neverRecord), [
      { attempt: 1, outcome: "failed", tag: "ProviderFailed", retryable: true },
      { attempt: 2, outcome: "failed", tag: "ProviderFailed", retryable: true },
      { attempt: 3, outcome: "failed", tag: "ProviderFailed", retryable: true }
    ])
    neverRecord.attempts.forEach((attempt, index) => {
      assert.match(attempt.error?.message ?? "", /exited with code 3 without a result/)
      assert.strictEqual(attempt.error?.stderr_tail, `scripted failure of attempt ${index + 1}`)
    })
    assert.deepStrictEqual(neverRecord.error, neverRecord.attempts[2]?.error ?? null)
    assert.isNull(neverRecord.result)

    // Not retryable: failed after one attempt although three were allowed; nothing started.
    assert.strictEqual(invalidRecord.state, "failed")
    assert.strictEqual(invalidRecord.attempt, 1)
    assert.strictEqual(invalidRecord.retry?.max_attempts, 3)
    assert.deepStrictEqual(attemptsOf(invalidRecord), [
      { attempt: 1, outcome: "failed", tag: "InvalidPayload", retryable: false }
    ])

    // What the fake did: every attempt of the retried tasks ran once, and no more.
    const effects = box.effects()
    for (const taskId of [lucky, never])
      assert.deepStrictEqual(
        effectsOf(effects, taskId),
        ["start:1", "done:1", "start:2", "done:2", "start:3", "done:3"],
        taskId
      )
    assert.deepStrictEqual(effectsOf(effects, invalid), [])

    terminate(worker.pid)
    const exit = await within("the worker to stop", worker.exited, 40_000)
    assert.deepStrictEqual(exit, { code: 0, signal: null }, logsOf(worker))
    const summary = worker.summary()
    assert.deepStrictEqual(
      [summary.finished, summary.failed, summary.retried, summary.released],
      [1, 2, 4, 0],
      "finished, failed, retried, released"
    )
  })
})
