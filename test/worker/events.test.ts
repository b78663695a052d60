/**
 * What the watching worker tells its operator (src/worker/events.ts): one JSON object per
 * event with exactly its fields, or readable lines under a live status line on a terminal.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Ref } from "effect"
import { ProviderFailed, ProviderTimeout } from "../../src/domain/errors.js"
import type { WorkerStatus } from "../../src/worker/events.js"
import { describeEvent, describeStatus, makeWorkerOutput, outputFormat } from "../../src/worker/events.js"
import {
  ClearLine,
  taskT,
  taskR,
  decodeLine,
  eventually,
  makeWorld,
  stopWith,
  scoped
} from "../support/watchWorld.js"

describe("the watching worker's output", () => {
  scoped("JSON: one object per line with exactly the fields of its event", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({
        script: (task) => {
          const kind = task.payload["kind"]
          if (kind === "flaky") return Effect.fail(new ProviderTimeout({ provider: "scripted", millis: 5 }))
          if (kind === "fatal")
            return Effect.fail(
              new ProviderFailed({ provider: "scripted", reason: "refused", retryable: false })
            )
          return Effect.succeed({ result: "ok" })
        }
      })
      const ok = yield* world.submit("ok", { kind: "ok" })
      const flaky = yield* world.submit("flaky", { kind: "flaky" })
      const fatal = yield* world.submit("fatal", { kind: "fatal" })
      const fiber = yield* world.start({ concurrency: 1 })
      yield* eventually(
        "three finished attempts",
        Effect.map(world.countOf("finished"), (n) => n === 3)
      )
      yield* stopWith(world, fiber)

      const text = yield* Ref.get(world.text)
      assert.isTrue(text.endsWith("\n"))
      assert.notInclude(text, ClearLine)
      const lines = text.slice(0, -1).split("\n")
      for (const line of lines)
        assert.isTrue(decodeLine(line)._tag === "Right", `not an event line: ${JSON.stringify(line)}`)
      const events = yield* world.events
      assert.deepStrictEqual(
        events.map((e) => e.event),
        [
          "started",
          "claimed",
          "finished",
          "claimed",
          "finished",
          "claimed",
          "finished",
          "stopping",
          "stopped"
        ]
      )
      const [started] = yield* world.eventsOf("started")
      assert.deepStrictEqual(started, {
        time: "1970-01-01T00:00:00.003Z",
        event: "started",
        worker_id: "watcher",
        pid: 100,
        concurrency: 1,
        max_per_provider: {},
        max_attempts: 2
      })
      const finished = yield* world.eventsOf("finished")
      assert.deepStrictEqual(
        finished.map(({ duration_ms: _ms, time: _time, ...rest }) => rest),
        [
          { event: "finished", task_id: ok.task_id, attempt: 1, provider: "fake-echo", outcome: "complete" },
          {
            event: "finished",
            task_id: flaky.task_id,
            attempt: 1,
            provider: "fake-echo",
            outcome: "failed",
            error: {
              tag: "ProviderTimeout",
              message: "scripted did not finish within 5 ms; its processes were stopped",
              retryable: true
            },
            requeued: true
          },
          {
            event: "finished",
            task_id: fatal.task_id,
            attempt: 1,
            provider: "fake-echo",
            outcome: "failed",
            error: { tag: "ProviderFailed", message: "scripted: refused", retryable: false },
            requeued: false
          }
        ]
      )
      const [stopped] = yield* world.eventsOf("stopped")
      assert.deepStrictEqual(
        [stopped?.reason, stopped?.finished, stopped?.failed, stopped?.released],
        ["SIGTERM", 1, 1, 0]
      )
    })
  )

  it.effect("tty: events go above a status line that is redrawn only when it changes", () =>
    Effect.gen(function* () {
      const written = yield* Ref.make<ReadonlyArray<string>>([])
      const tty = yield* makeWorkerOutput("tty", (chunk) => Ref.update(written, (all) => [...all, chunk]))
      const status: WorkerStatus = { running: 1, queued: 2, finished: 0, failed: 0 }
      const line = "running 1 · queued 2 · finished 0 · failed 0"
      assert.strictEqual(describeStatus(status), line)

      yield* tty.status(status)
      yield* tty.status(status)
      yield* tty.event({ event: "claimed", task_id: taskT, attempt: 1, provider: "fake-echo" })
      yield* tty.status({ ...status, running: 0, finished: 1 })
      yield* tty.event({ event: "stopped", reason: "SIGTERM", finished: 1, failed: 0, released: 0 })
      const time = "1970-01-01T00:00:00.000Z"
      assert.deepStrictEqual(yield* Ref.get(written), [
        `${ClearLine}${line}`,
        `${ClearLine}${time} claimed ${taskT} attempt 1 (fake-echo)\n${line}`,
        `${ClearLine}running 0 · queued 2 · finished 1 · failed 0`,
        // After the last event the shell's prompt comes next: no status line below it.
        `${ClearLine}${time} stopped (SIGTERM): 1 finished, 0 failed, 0 released\n`
      ])

      // A store that cannot count its queue cheaply (PostgreSQL) leaves the count out.
      assert.strictEqual(
        describeStatus({ ...status, queued: undefined }),
        "running 1 · finished 0 · failed 0"
      )

      const plain = yield* Ref.make<ReadonlyArray<string>>([])
      const textOutput = yield* makeWorkerOutput("text", (chunk) =>
        Ref.update(plain, (all) => [...all, chunk])
      )
      const reaped = {
        event: "reaped",
        task_id: taskR,
        attempt: 2,
        reason: "owner_dead",
        state: "queued"
      } as const
      yield* textOutput.status(status)
      yield* textOutput.event(reaped)
      assert.deepStrictEqual(yield* Ref.get(plain), [`${time} ${describeEvent(reaped)}\n`])
      assert.strictEqual(describeEvent(reaped), `reaped ${taskR} attempt 2 (owner_dead): now queued`)
    })
  )

  scoped("tty: a watching worker keeps the status line current and ends on its last event", () =>
    Effect.gen(function* () {
      const world = yield* makeWorld({ format: "tty" })
      yield* world.submit("one")
      const fiber = yield* world.start()
      // Events are not JSON here: wait on the statuses the loop reports instead.
      yield* eventually(
        "a status after the task finished",
        Effect.map(Ref.get(world.statuses), (all) => all.some((s) => s.finished === 1))
      )
      yield* stopWith(world, fiber)
      const text = yield* Ref.get(world.text)
      assert.include(text, `${ClearLine}running 1 · queued 0 · finished 0 · failed 0`)
      assert.include(text, `${ClearLine}running 0 · queued 0 · finished 1 · failed 0`)
      // The last write is the stopped event on a cleared line, with no status line below it.
      const last = text.slice(text.lastIndexOf(ClearLine) + ClearLine.length)
      assert.match(last, /^\S+ stopped \(SIGTERM\): 1 finished, 0 failed, 0 released\n$/)
    })
  )
})

describe("outputFormat", () => {
  it("redraws a status line only on a terminal without NO_COLOR; an explicit format is kept", () => {
    assert.strictEqual(outputFormat("auto", true, undefined), "tty")
    assert.strictEqual(outputFormat("auto", true, ""), "tty")
    assert.strictEqual(outputFormat("auto", true, "1"), "text")
    assert.strictEqual(outputFormat("auto", false, undefined), "text")
    assert.strictEqual(outputFormat("json", true, undefined), "json")
    assert.strictEqual(outputFormat("text", true, undefined), "text")
  })
})
