/**
 * Broadcasts over real stores (memory and file, and PostgreSQL when RELAYKEEP_TEST_PG_URL is set): idempotent group receipts, conflicts that change
 * nothing, a submitter stopped between its steps, reads by the group's receipt, and a wait woken
 * by a member's change.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Deferred, Effect, Fiber, Option, PubSub, Stream, TestClock } from "effect"
import { readGroup, readGroupTrusted } from "../../src/broadcast/read.js"
import type { BroadcastRequest } from "../../src/broadcast/submit.js"
import { submitBroadcast } from "../../src/broadcast/submit.js"
import { groupPayload, memberRequestId } from "../../src/domain/broadcast.js"
import { ClientRequestId, PayloadSha256, TaskId } from "../../src/domain/ids.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { pgAvailable, pgStore } from "../support/pg.js"
import { fileStore, memoryStore } from "../support/stores.js"

const request = (overrides: Partial<BroadcastRequest> = {}): BroadcastRequest => ({
  clientRequestId: ClientRequestId.make("second-opinion"),
  targets: [
    { provider: "fake-echo", model: "a" },
    { provider: "fake-echo", model: "b" }
  ],
  payload: { prompt: "review this" },
  ...overrides
})

/** Every task the store holds, by id and state: what must not change when a request is refused. */
const everything = (store: TaskStoreShape) =>
  Effect.map(store.list({ limit: 100 }), (page) =>
    page.tasks.map((task) => `${task.task_id} ${task.state} ${task.updated_at}`).sort()
  )

/** Run a member to completion as a worker would: claim it and complete it with `result`. */
const finish = (store: TaskStoreShape, taskId: TaskId, result: unknown) =>
  Effect.gen(function* () {
    const claimed = yield* store.claim(taskId, { workerId: "w", leaseMillis: 60_000 })
    assert.isTrue(Option.isSome(claimed))
    if (Option.isSome(claimed)) yield* store.complete(taskId, claimed.value.lease, result)
  })

const stores: ReadonlyArray<readonly [string, () => Effect.Effect<TaskStoreShape, unknown, Scope.Scope>]> = [
  ["memory", () => memoryStore()],
  ["file", () => fileStore()],
  // With RELAYKEEP_TEST_PG_URL set: the same rules on PostgreSQL.
  ...(pgAvailable ? [["postgres", () => pgStore()] as const] : [])
]

for (const [name, makeStore] of stores) {
  describe(`broadcast on the ${name} store`, () => {
    const withStore = <A, E>(body: (store: TaskStoreShape) => Effect.Effect<A, E, TaskStore>) =>
      Effect.flatMap(makeStore(), (store) => Effect.provideService(body(store), TaskStore, store))

    it.scopedLive("queues one task per target and returns the same group receipt every time", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const first = yield* submitBroadcast(request())
          assert.strictEqual(first.members.length, 2)
          assert.deepStrictEqual(
            first.members.map((member) => [member.provider, member.model]),
            [
              ["fake-echo", "a"],
              ["fake-echo", "b"]
            ]
          )
          const member = yield* store.record(first.members[1]?.task_id ?? first.group_id)
          assert.deepStrictEqual(member.payload, { prompt: "review this", provider: "fake-echo", model: "b" })
          assert.strictEqual(member.client_request_id, `broadcast:${first.group_id}:2`)
          const group = yield* store.record(first.group_id)
          assert.strictEqual(group.state, "complete")
          assert.deepStrictEqual(group.result, { members: first.members })

          const before = yield* everything(store)
          const again = yield* submitBroadcast(request())
          assert.deepStrictEqual(again, first)
          assert.deepStrictEqual(yield* everything(store), before, "a resubmission changes nothing")
          assert.strictEqual(before.length, 3, "the group record and two members")
        })
      )
    )

    it.scopedLive(
      "other targets or another prompt under the same id: ConflictError, and nothing changes",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const first = yield* submitBroadcast(request())
            const before = yield* everything(store)
            const otherTargets = yield* Effect.flip(
              submitBroadcast(request({ targets: [{ provider: "fake-echo", model: "a" }] }))
            )
            assert.strictEqual(otherTargets._tag, "ConflictError")
            const otherPrompt = yield* Effect.flip(
              submitBroadcast(request({ payload: { prompt: "something else" } }))
            )
            assert.strictEqual(otherPrompt._tag, "ConflictError")
            assert.include(otherPrompt.message, first.group_id)
            assert.deepStrictEqual(yield* everything(store), before)
          })
        )
    )

    it.scopedLive("bad input is refused before anything is stored, naming the field", () =>
      withStore((store) =>
        Effect.gen(function* () {
          const refusals = [
            [request({ payload: { prompt: "x", model: "m" } }), "payload", "must not name model"],
            [
              request({
                targets: [{ provider: "claude", model: "sonnet" }],
                payload: { prompt: "x", extra: 1 }
              }),
              "payload",
              "entry 1 (claude)"
            ],
            [request({ targets: [{ provider: "claude", model: "-rm" }] }), "targets", "model"],
            [request({ targets: [{ provider: "broadcast", model: "x" }] }), "targets", "reserved"],
            [request({ targets: [{ provider: "mcp-tool", model: "x" }] }), "targets", "reserved"],
            [request({ targets: [] }), "targets", "1 to 8"],
            [
              request({
                targets: [
                  { provider: "fake-echo", model: "a" },
                  { provider: "fake-echo", model: "a" }
                ]
              }),
              "targets",
              "twice"
            ],
            [
              request({
                targets: Array.from({ length: 9 }, (_, i) => ({ provider: "fake-echo", model: `m${i}` }))
              }),
              "targets",
              "1 to 8"
            ]
          ] as const
          for (const [bad, field, reason] of refusals) {
            const error = yield* Effect.flip(submitBroadcast(bad))
            assert.strictEqual(error._tag, "InvalidInput")
            if (error._tag === "InvalidInput") {
              assert.strictEqual(error.field, field, error.message)
              assert.include(error.reason, reason)
            }
          }
          assert.deepStrictEqual(yield* everything(store), [])
        })
      )
    )

    it.scopedLive(
      "a submitter stopped after one member: the group is not acknowledged until resubmitted",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const { clientRequestId, targets, payload } = request()
            // What a submitter that died after its second step's first write left behind.
            const group = yield* store.submit({ clientRequestId, payload: groupPayload(targets, payload) })
            const lone = yield* store.submit({
              clientRequestId: memberRequestId(group.task_id, 0),
              payload: { ...payload, provider: "fake-echo", model: "a" }
            })
            const unsettled = yield* Effect.flip(readGroup(group.task_id, group.payload_sha256))
            assert.strictEqual(unsettled._tag, "GroupUnsettled")
            assert.include(unsettled.message, "submit the same broadcast again")

            const receipt = yield* submitBroadcast(request())
            assert.strictEqual(receipt.group_id, group.task_id)
            assert.strictEqual(receipt.payload_sha256, group.payload_sha256)
            assert.strictEqual(receipt.created_at, group.created_at)
            assert.deepStrictEqual(receipt.members[0], {
              provider: "fake-echo",
              model: "a",
              ...lone
            })
            assert.strictEqual((yield* everything(store)).length, 3)
            const view = yield* readGroup(receipt.group_id, receipt.payload_sha256)
            assert.strictEqual(view.members.length, 2)
          })
        )
    )

    it.scopedLive(
      "a cancelled group is not settled again, and queues no member; a member id held by another payload cancels the group",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const { clientRequestId, targets, payload } = request()
            // A stopped submitter's group record, cancelled by its user.
            const group = yield* store.submit({ clientRequestId, payload: groupPayload(targets, payload) })
            yield* store.cancel(group.task_id, group.payload_sha256)
            const before = yield* everything(store)
            const refused = yield* Effect.flip(submitBroadcast(request()))
            assert.strictEqual(refused._tag, "GroupUnsettled")
            assert.include(refused.message, "new client_request_id")
            assert.deepStrictEqual(yield* everything(store), before, "no member was queued")

            // Another group whose second member's id already holds another payload.
            const other = request({ clientRequestId: ClientRequestId.make("taken") })
            const otherGroup = yield* store.submit({
              clientRequestId: other.clientRequestId,
              payload: groupPayload(other.targets, other.payload)
            })
            yield* store.submit({
              clientRequestId: memberRequestId(otherGroup.task_id, 1),
              payload: { other: true }
            })
            const conflict = yield* Effect.flip(submitBroadcast(other))
            assert.strictEqual(conflict._tag, "ConflictError")
            assert.strictEqual(
              (yield* store.record(otherGroup.task_id)).state,
              "cancelled",
              "not left queued"
            )
          })
        )
    )

    it.scopedLive(
      "a submitter that died holding the group record: once reaped, the same broadcast settles it",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const { clientRequestId, targets, payload } = request()
            const group = yield* store.submit({ clientRequestId, payload: groupPayload(targets, payload) })
            const held = yield* store.claim(group.task_id, {
              workerId: "broadcast",
              leaseMillis: 60_000,
              retry: { max_attempts: 1000, backoff_initial_ms: 0, backoff_max_ms: 0 }
            })
            assert.isTrue(Option.isSome(held))
            if (Option.isNone(held)) return
            assert.strictEqual(yield* store.reap(group.task_id, held.value.lease, "owner_dead"), "queued")
            const receipt = yield* submitBroadcast(request())
            assert.strictEqual((yield* store.record(receipt.group_id)).state, "complete")
          })
        )
    )

    it.scopedLive(
      "reading: by the group's receipt, side by side; a wrong hash, an unknown id or a plain task is refused",
      () =>
        withStore((store) =>
          Effect.gen(function* () {
            const receipt = yield* submitBroadcast(request())
            const queued = yield* readGroup(receipt.group_id, receipt.payload_sha256)
            assert.strictEqual(queued.state, "running")
            assert.deepStrictEqual(queued.counts, {
              queued: 2,
              running: 0,
              complete: 0,
              failed: 0,
              cancelled: 0
            })
            assert.strictEqual(queued.client_request_id, "second-opinion")

            const [a, b] = receipt.members
            if (a === undefined || b === undefined) return assert.fail("two members")
            yield* finish(store, a.task_id, { answer: "A" })
            const claimed = yield* store.claim(b.task_id, { workerId: "w", leaseMillis: 60_000 })
            if (Option.isSome(claimed))
              yield* store.fail(b.task_id, claimed.value.lease, { tag: "ProviderFailed", message: "no" })
            const done = yield* readGroup(receipt.group_id, receipt.payload_sha256)
            assert.strictEqual(done.state, "failed")
            assert.deepStrictEqual(
              done.members.map((member) => [member.model, member.state, member.task_id]),
              [
                ["a", "complete", a.task_id],
                ["b", "failed", b.task_id]
              ]
            )
            assert.deepStrictEqual(done.members[0]?.result, { answer: "A" })
            assert.deepStrictEqual(yield* readGroupTrusted(receipt.group_id), done)

            const forged = PayloadSha256.make("0".repeat(64))
            const mismatch = yield* Effect.flip(readGroup(receipt.group_id, forged))
            const asRead = yield* Effect.flip(store.read(receipt.group_id, forged))
            assert.strictEqual(mismatch._tag, "HashMismatch")
            assert.strictEqual(mismatch.message, asRead.message)

            const unknown = yield* Effect.flip(readGroup(TaskId.make("e".repeat(64)), forged))
            assert.strictEqual(unknown._tag, "UnknownTask")

            const notGroup = yield* Effect.flip(readGroup(a.task_id, a.payload_sha256))
            assert.strictEqual(notGroup._tag, "NotAGroup")
          })
        )
    )
  })
}

describe("waiting for a group", () => {
  it.scoped("wakes on a member's change, not on a poll (the test clock never moves)", () =>
    Effect.gen(function* () {
      const memory = yield* memoryStore()
      // The store's signal, told by the test after each member's change; it replays to a late
      // listener, so the reader hears every change whenever its listening starts.
      const changed = yield* PubSub.unbounded<TaskId>({ replay: 8 })
      const store: TaskStoreShape = { ...memory, changes: Stream.fromPubSub(changed) }
      const receipt = yield* submitBroadcast(request()).pipe(Effect.provideService(TaskStore, store))
      const waiting = yield* Deferred.make<void>()
      const reading = yield* Effect.fork(
        readGroup(receipt.group_id, receipt.payload_sha256, {
          waitMillis: 20_000,
          onProgress: () => Deferred.succeed(waiting, undefined)
        }).pipe(Effect.provideService(TaskStore, store))
      )
      yield* Deferred.await(waiting)
      for (const member of receipt.members) {
        yield* finish(store, member.task_id, { from: member.model })
        yield* PubSub.publish(changed, member.task_id)
      }
      const view = yield* Fiber.join(reading)
      assert.strictEqual(view.state, "complete")
      assert.deepStrictEqual(view.counts, { queued: 0, running: 0, complete: 2, failed: 0, cancelled: 0 })
    })
  )

  it.scoped("answers as it is once the wait is up", () =>
    Effect.gen(function* () {
      const store = yield* memoryStore()
      const receipt = yield* submitBroadcast(request()).pipe(Effect.provideService(TaskStore, store))
      const waited: Array<number> = []
      const reading = yield* Effect.fork(
        readGroup(receipt.group_id, receipt.payload_sha256, {
          waitMillis: 3_000,
          onProgress: (millis) => Effect.sync(() => waited.push(millis))
        }).pipe(Effect.provideService(TaskStore, store))
      )
      for (let second = 0; second < 3; second++) yield* TestClock.adjust(1_000)
      const view = yield* Fiber.join(reading)
      assert.strictEqual(view.state, "running")
      assert.deepStrictEqual(waited, [0, 1_000, 2_000])
    })
  )
})
