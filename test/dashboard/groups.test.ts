/**
 * The dashboard's group route over a real HTTP connection, on a real file store: a broadcast's
 * members side by side as they run, and the refusals of an unknown id, a plain task, a group
 * never acknowledged and a malformed id, each changing nothing; the guards before it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import { submitBroadcast } from "../../src/broadcast/submit.js"
import { GroupView, groupPayload } from "../../src/domain/broadcast.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import { jsonBody, postJson, withDashboard } from "../support/dashboard.js"
import { errorMessage, errorTag } from "../support/http.js"

const GroupReply = Schema.decodeUnknownSync(Schema.parseJson(Schema.Struct({ group: GroupView })))

const targets = [
  { provider: "fake-echo", model: "a" },
  { provider: "fake-echo", model: "b" }
]

const broadcast = (store: TaskStoreShape) =>
  submitBroadcast({
    clientRequestId: ClientRequestId.make("second-opinion"),
    targets,
    payload: { prompt: "review this" }
  }).pipe(Effect.provideService(TaskStore, store))

/** Claim a member as a worker would, then complete it with `result` or fail it. */
const finish = (store: TaskStoreShape, taskId: TaskId, outcome: { readonly result: unknown } | "fail") =>
  Effect.gen(function* () {
    const claimed = yield* store.claim(taskId, { workerId: "w-1", leaseMillis: 60_000 })
    if (Option.isNone(claimed)) return assert.fail(`could not claim ${taskId}`)
    const lease = claimed.value.lease
    if (outcome === "fail") yield* store.fail(taskId, lease, { tag: "ProviderFailed", message: "no answer" })
    else yield* store.complete(taskId, lease, outcome.result)
  })

describe("dashboard API: a broadcast group", () => {
  it.live("GET /api/groups/:id shows every member side by side, as they run and finish", () =>
    withDashboard(
      ({ call, bearer, store }) =>
        Effect.gen(function* () {
          const receipt = yield* broadcast(store)
          const [a, b] = receipt.members
          if (a === undefined || b === undefined) return assert.fail("two members")
          const path = `/api/groups/${receipt.group_id}`

          const queued = GroupReply((yield* call(path, { headers: bearer })).body).group
          assert.strictEqual(queued.group_id, receipt.group_id)
          assert.strictEqual(queued.client_request_id, "second-opinion")
          assert.strictEqual(queued.payload_sha256, receipt.payload_sha256)
          assert.strictEqual(queued.state, "running")
          assert.deepStrictEqual(
            queued.members.map((member) => [member.provider, member.model, member.task_id, member.state]),
            [
              ["fake-echo", "a", a.task_id, "queued"],
              ["fake-echo", "b", b.task_id, "queued"]
            ]
          )

          yield* finish(store, a.task_id, { result: "the answer of a" })
          yield* finish(store, b.task_id, "fail")
          const reply = yield* call(path, { headers: bearer })
          assert.strictEqual(reply.status, 200)
          const done = GroupReply(reply.body).group
          assert.strictEqual(done.state, "failed")
          assert.deepStrictEqual(done.counts, { queued: 0, running: 0, complete: 1, failed: 1, cancelled: 0 })
          const [first, second] = done.members
          assert.strictEqual(first?.result, "the answer of a")
          assert.isNull(first?.error)
          assert.strictEqual(first?.attempts.length, 1)
          assert.strictEqual(first?.attempts[0]?.worker_id, "w-1")
          assert.isString(first?.finished_at)
          assert.strictEqual(second?.state, "failed")
          assert.strictEqual(second?.error?.tag, "ProviderFailed")
          assert.isNull(second?.result)
          // The members are ordinary tasks, named after their group.
          assert.deepStrictEqual(
            done.members.map((member) => member.client_request_id),
            [`broadcast:${receipt.group_id}:1`, `broadcast:${receipt.group_id}:2`]
          )
        }),
      { store: "file" }
    )
  )

  it.live(
    "an unknown id → 404 UnknownTask, a plain task → 404 NotAGroup, a group never acknowledged → 409 GroupUnsettled, a malformed id → 400; nothing changes",
    () =>
      withDashboard(
        ({ call, bearer, store, unchanged }) =>
          Effect.gen(function* () {
            const plain = yield* store.submit({
              clientRequestId: ClientRequestId.make("plain"),
              payload: { prompt: "p" }
            })
            // What a submitter that stopped after its first write leaves: a group record, queued.
            const unsettled = yield* store.submit({
              clientRequestId: ClientRequestId.make("stopped"),
              payload: groupPayload(targets, { prompt: "p" })
            })
            yield* unchanged(
              Effect.gen(function* () {
                const cases: ReadonlyArray<readonly [string, number, string, RegExp]> = [
                  [`/api/groups/${"e".repeat(64)}`, 404, "UnknownTask", /e{64}/],
                  [`/api/groups/${plain.task_id}`, 404, "NotAGroup", /is not a broadcast group/],
                  [
                    `/api/groups/${unsettled.task_id}`,
                    409,
                    "GroupUnsettled",
                    /was never acknowledged \(its record is queued\)/
                  ],
                  ["/api/groups/not-an-id", 400, "InvalidInput", /^group_id:/]
                ]
                for (const [path, status, tag, message] of cases) {
                  const reply = yield* call(path, { headers: bearer })
                  assert.strictEqual(reply.status, status, path)
                  assert.strictEqual(errorTag(reply), tag, path)
                  assert.match(errorMessage(reply), message, path)
                }
                // A malformed id is named, never repeated.
                const secret = "sk-live-7f3a9QX"
                const named = yield* call(`/api/groups/${secret}`, { headers: bearer })
                assert.strictEqual(named.status, 400)
                assert.notInclude(named.body, secret)
                // Only GET: anything else there is no route.
                const posted = yield* call(`/api/groups/${plain.task_id}`, postJson(bearer, jsonBody({})))
                assert.strictEqual(posted.status, 404)
                assert.strictEqual(errorTag(posted), "NotFound")
              })
            )
          }),
        { store: "file" }
      )
  )

  it.live("behind the guards: no token, a cookie, a wrong Host → refused, and the group is not shown", () =>
    withDashboard(
      ({ call, bearer, token, port, store }) =>
        Effect.gen(function* () {
          const receipt = yield* broadcast(store)
          const path = `/api/groups/${receipt.group_id}`
          const wrong = "0".repeat(64) === token ? "1".repeat(64) : "0".repeat(64)
          const refusals: ReadonlyArray<readonly [Readonly<Record<string, string>>, number, string]> = [
            [{}, 401, "Unauthorized"],
            [{ authorization: `Bearer ${wrong}` }, 401, "Unauthorized"],
            [{ cookie: `relaykeep_dashboard=${token}` }, 401, "Unauthorized"],
            [{ ...bearer, host: "evil.example" }, 403, "ForbiddenHost"],
            [{ ...bearer, host: `127.0.0.1:${port + 1}` }, 403, "ForbiddenHost"]
          ]
          for (const [headers, status, tag] of refusals) {
            const reply = yield* call(path, { headers })
            assert.strictEqual(reply.status, status, JSON.stringify(headers))
            assert.strictEqual(errorTag(reply), tag)
            assert.notInclude(reply.body, receipt.members[0]?.task_id ?? "none")
          }
          const query = yield* call(`${path}?token=${token}`)
          assert.strictEqual(query.status, 401)
          assert.strictEqual((yield* call(path, { headers: bearer })).status, 200)
        }),
      { store: "file" }
    )
  )
})
