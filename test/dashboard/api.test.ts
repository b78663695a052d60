/**
 * The dashboard's API over a real HTTP connection (test/support/dashboard.ts): the body's
 * refusals (and that they changed nothing and repeated nothing they were sent), every route's
 * happy path and the event stream. The guards before the routes: server.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Schema } from "effect"
import * as http from "node:http"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import { CancelOutcome, Receipt, TaskRecord, TaskSummary } from "../../src/domain/Task.js"
import type { WorkerPresence } from "../../src/domain/worker.js"
import { WorkerView } from "../../src/worker/registry.js"
import { jsonBody, postJson, withDashboard } from "../support/dashboard.js"
import type { RequestOptions } from "../support/http.js"
import { assertSecurityHeaders, errorMessage, errorTag } from "../support/http.js"
import { jcsSha256 } from "../support/jcs.js"
import { presenceAt } from "../support/presence.js"

const json = <A, I>(schema: Schema.Schema<A, I>) => Schema.decodeUnknownSync(Schema.parseJson(schema))
const SubmitReply = json(Schema.Struct({ receipt: Receipt, task: TaskSummary }))
const ListReply = json(
  Schema.Struct({ tasks: Schema.Array(TaskSummary), next_cursor: Schema.NullOr(Schema.String) })
)
const TaskReply = json(Schema.Struct({ task: TaskRecord }))
const CancelReply = json(Schema.Struct({ outcome: CancelOutcome }))
const WorkersFields = { workers: Schema.Array(WorkerView), registry_error: Schema.NullOr(Schema.String) }
const HealthReply = json(
  Schema.Struct({
    status: Schema.Literal("ok"),
    version: Schema.String,
    store: Schema.Struct({ kind: Schema.Literal("file"), root: Schema.String }),
    counts: Schema.Record({ key: Schema.String, value: Schema.Number }),
    ...WorkersFields
  })
)
const WorkersReply = json(Schema.Struct(WorkersFields))
const Counts = Schema.Struct({
  submitted: Schema.Number,
  complete: Schema.Number,
  failed: Schema.Number,
  cancelled: Schema.Number
})
const StatsReply = json(
  Schema.Struct({
    now: Schema.String,
    hour: Counts,
    day: Counts,
    buckets: Schema.Array(Schema.extend(Counts, Schema.Struct({ start: Schema.String })))
  })
)
const AuditReply = json(
  Schema.Struct({
    entries: Schema.Array(Schema.Struct({ tool: Schema.String, time: Schema.String, status: Schema.String }))
  })
)
const DoctorReply = json(
  Schema.Struct({
    ok: Schema.Boolean,
    work_dir: Schema.NullOr(Schema.String),
    providers: Schema.Array(
      Schema.Struct(
        { provider: Schema.String, ok: Schema.Boolean },
        { key: Schema.String, value: Schema.Unknown }
      )
    )
  })
)

describe("dashboard API: refusals of the body change nothing", () => {
  it.live("an oversized body → 413; a wrong content type → 415", () =>
    withDashboard(({ call, bearer, unchanged }) =>
      unchanged(
        Effect.gen(function* () {
          const big = jsonBody({ payload: { text: "x".repeat(1024 * 1024 + 64 * 1024) } })
          const tooLarge = yield* call("/api/tasks", postJson(bearer, big))
          assert.strictEqual(tooLarge.status, 413)
          assert.strictEqual(errorTag(tooLarge), "PayloadTooLarge")
          for (const type of [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            ""
          ]) {
            const reply = yield* call("/api/tasks", {
              method: "POST",
              headers: type === "" ? bearer : { ...bearer, "content-type": type },
              body: jsonBody({ payload: {} })
            })
            assert.strictEqual(reply.status, 415, type)
            assert.strictEqual(errorTag(reply), "UnsupportedMediaType")
            assert.strictEqual(errorMessage(reply), "Content-Type: must be application/json")
          }
        })
      )
    )
  )

  it.live("malformed JSON and schema failures → 400 InvalidInput naming the field", () =>
    withDashboard(({ call, bearer, unchanged }) =>
      unchanged(
        Effect.gen(function* () {
          const cases: ReadonlyArray<readonly [string, string]> = [
            ["{not json", "body"],
            ["[1,2]", "body"],
            ['"text"', "body"],
            [jsonBody({}), "payload"],
            [jsonBody({ payload: [1] }), "payload"],
            [jsonBody({ payload: "x" }), "payload"],
            [jsonBody({ payload: {}, request_id: "" }), "request_id"],
            [jsonBody({ payload: {}, request_id: "x".repeat(201) }), "request_id"],
            [jsonBody({ payload: {}, request_id: "a\u0001b" }), "request_id"],
            [jsonBody({ payload: {}, extra: 1 }), "extra"],
            // The store's own check: at most 1 MiB of canonical JSON.
            [jsonBody({ payload: { text: "x".repeat(1024 * 1024) } }), "payload"]
          ]
          for (const [body, field] of cases) {
            const reply = yield* call("/api/tasks", postJson(bearer, body))
            assert.strictEqual(reply.status, 400, body.slice(0, 60))
            assert.strictEqual(errorTag(reply), "InvalidInput")
            assert.match(errorMessage(reply), new RegExp(`^${field}[:.]`), body.slice(0, 60))
          }
          for (const limit of ["0", "1e1", "0x10", "5.0", "+5", "%205", "501"]) {
            const badLimit = yield* call(`/api/tasks?limit=${limit}`, { headers: bearer })
            assert.strictEqual(badLimit.status, 400, `limit=${limit}`)
            assert.match(
              errorMessage(badLimit),
              /^limit: must be a whole number from 1 to \d+, in decimal digits$/
            )
          }
          assert.strictEqual((yield* call("/api/tasks?limit=10", { headers: bearer })).status, 200)
          const badState = yield* call("/api/tasks?state=done", { headers: bearer })
          assert.match(errorMessage(badState), /^state:/)
          const badCursor = yield* call("/api/tasks?cursor=zzz", { headers: bearer })
          assert.strictEqual(badCursor.status, 400)
          const badId = yield* call("/api/tasks/not-an-id", { headers: bearer })
          assert.strictEqual(badId.status, 400)
          assert.match(errorMessage(badId), /^task_id:/)
          const badSince = yield* call("/api/audit?since=yesterday-ish", { headers: bearer })
          assert.match(errorMessage(badSince), /^since:/)
          const unknown = yield* call(`/api/tasks/${"b".repeat(64)}`, { headers: bearer })
          assert.strictEqual(unknown.status, 404)
          assert.strictEqual(errorTag(unknown), "UnknownTask")
          const nowhere = yield* call("/api/nowhere", { headers: bearer })
          assert.strictEqual(nowhere.status, 404)
          assert.strictEqual(errorTag(nowhere), "NotFound")
          const notServed = yield* call("/secret.txt", { headers: bearer })
          assert.strictEqual(notServed.status, 404)
        })
      )
    )
  )
})

describe("dashboard API: refusals repeat nothing they were sent", () => {
  it.live("each names its field and rule; the value sent appears in no answer", () =>
    withDashboard(({ call, bearer, unchanged }) =>
      unchanged(
        Effect.gen(function* () {
          const secret = "sk-live-7f3a9QX"
          const text = (body: string): RequestOptions => ({
            method: "POST",
            headers: { ...bearer, "content-type": `text/plain; note=${secret}` },
            body
          })
          const cases: ReadonlyArray<readonly [string, RequestOptions, string]> = [
            ["/api/tasks", text("{}"), "Content-Type"],
            [`/api/tasks?state=${secret}`, { headers: bearer }, "state"],
            [`/api/tasks?limit=${secret}`, { headers: bearer }, "limit"],
            [`/api/tasks?cursor=${secret}`, { headers: bearer }, "cursor"],
            [`/api/audit?since=${secret}`, { headers: bearer }, "since"],
            [`/api/audit?outcome=${secret}`, { headers: bearer }, "outcome"],
            [`/api/tasks/${secret}`, { headers: bearer }, "task_id"],
            [`/api/tasks/${secret}/cancel`, { method: "POST", headers: bearer }, "task_id"],
            ["/api/tasks", postJson(bearer, jsonBody({ payload: secret })), "payload"],
            ["/api/tasks", postJson(bearer, jsonBody({ payload: [secret] })), "payload"],
            [
              "/api/tasks",
              postJson(bearer, jsonBody({ payload: {}, request_id: `${secret}\u0001` })),
              "request_id"
            ],
            [
              "/api/tasks",
              postJson(bearer, jsonBody({ payload: {}, request_id: secret.repeat(30) })),
              "request_id"
            ],
            ["/api/tasks", postJson(bearer, jsonBody([secret])), "body"],
            // The in-server provider is reserved: no worker would ever run such a task.
            [
              "/api/tasks",
              postJson(bearer, jsonBody({ payload: { provider: "mcp-tool", note: secret } })),
              "payload"
            ],
            // So is a broadcast member's request id: only its broadcast makes it.
            [
              "/api/tasks",
              postJson(bearer, jsonBody({ payload: {}, request_id: `broadcast:${"c".repeat(64)}:1` })),
              "request_id"
            ]
          ]
          for (const [target, options, field] of cases) {
            const reply = yield* call(target, options)
            assert.include([400, 415], reply.status, target)
            assert.match(errorMessage(reply), new RegExp(`^${field}[:.]`), target)
            assert.notInclude(reply.body, secret, target)
          }
          const utf8 = yield* call("/api/tasks", {
            method: "POST",
            headers: { ...bearer, "content-type": "application/json" },
            body: Buffer.concat([
              Buffer.from(`{"payload":{"k":"${secret}`),
              Buffer.from([0xff]),
              Buffer.from('"}}')
            ])
          })
          assert.strictEqual(utf8.status, 400)
          assert.strictEqual(errorMessage(utf8), "body: is not valid UTF-8")
        })
      )
    )
  )
})

describe("dashboard API: bodies are read strictly, and kept exactly as sent", () => {
  it.live(
    "duplicate keys, big integers, lone surrogates, invalid UTF-8 → 400 naming the JSON path; nothing echoed or stored",
    () =>
      withDashboard(({ call, bearer, unchanged }) =>
        unchanged(
          Effect.gen(function* () {
            const secret = "sk-live-7f3a9QX"
            const cases: ReadonlyArray<readonly [string, string]> = [
              [`{"payload":{"k":"${secret}"},"payload":{}}`, "body: not valid JSON: payload: duplicate key"],
              [
                `{"payload":{},"request_id":"${secret}","request_id":"b"}`,
                "body: not valid JSON: request_id: duplicate key"
              ],
              [
                `{"payload":{"a":[{"k":"${secret}","k":"${secret}"}]}}`,
                "body: not valid JSON: payload.a.0.k: duplicate key"
              ],
              [
                `{"payload":{"n":9007199254740993,"k":"${secret}"}}`,
                "body: not valid JSON: payload.n: a number beyond ±(2^53−1) cannot be held exactly"
              ],
              [
                `{"payload":{"n":-1e400,"k":"${secret}"}}`,
                "body: not valid JSON: payload.n: a number beyond ±(2^53−1) cannot be held exactly"
              ],
              [
                String.raw`{"payload":{"s":"${secret}\udc00"}}`,
                "body: not valid JSON: payload.s: a string is not well-formed Unicode (a lone surrogate)"
              ],
              // A `__proto__` beside payload is an unexpected member of the body, as any other.
              [`{"payload":{},"__proto__":{"k":"${secret}"}}`, "__proto__: is unexpected"]
            ]
            for (const [body, message] of cases) {
              const reply = yield* call("/api/tasks", postJson(bearer, body))
              assert.strictEqual(reply.status, 400, body)
              assert.strictEqual(errorTag(reply), "InvalidInput", body)
              assert.include(errorMessage(reply), message, body)
              assert.notInclude(reply.body, secret, body)
            }
            // Invalid UTF-8 in a body: refused whole, never replaced, never echoed.
            for (const bytes of [
              [0xc3, 0x28],
              [0xed, 0xa0, 0x80],
              [0xf8, 0x88, 0x80, 0x80, 0x80]
            ]) {
              const reply = yield* call("/api/tasks", {
                method: "POST",
                headers: { ...bearer, "content-type": "application/json" },
                body: Buffer.concat([
                  Buffer.from(`{"payload":{"k":"${secret}`),
                  Buffer.from(bytes),
                  Buffer.from('"}}')
                ])
              })
              assert.strictEqual(reply.status, 400, String(bytes))
              assert.strictEqual(errorMessage(reply), "body: is not valid UTF-8")
              assert.notInclude(reply.body, secret)
            }
            // Over the body limit: 413, and nothing of the body comes back.
            const big = jsonBody({ payload: { k: secret, text: "x".repeat(1024 * 1024 + 64 * 1024) } })
            const tooLarge = yield* call("/api/tasks", postJson(bearer, big))
            assert.strictEqual(tooLarge.status, 413)
            assert.notInclude(tooLarge.body, secret)
            for (const limit of ["01", "1e1", "%205", "5%20", "1_0", "%EF%BC%95"]) {
              const reply = yield* call(`/api/tasks?limit=${limit}`, { headers: bearer })
              assert.strictEqual(reply.status, 400, `limit=${limit}`)
              assert.match(
                errorMessage(reply),
                /^limit: must be a whole number from 1 to 200, in decimal digits$/
              )
            }
            const auditLimit = yield* call("/api/audit?limit=01", { headers: bearer })
            assert.strictEqual(auditLimit.status, 400)
            assert.match(errorMessage(auditLimit), /^limit: /)
          })
        )
      )
  )

  it.live(
    "a payload's __proto__ and constructor keys are data: the receipt is the RFC 8785 hash as sent",
    () =>
      withDashboard(({ call, bearer, store }) =>
        Effect.gen(function* () {
          const payloads = [
            `{"a":1}`,
            `{"a":1,"__proto__":{"admin":true}}`,
            `{"a":1,"constructor":{"prototype":{}}}`
          ]
          const receipts = []
          for (const [index, payload] of payloads.entries()) {
            const reply = yield* call(
              "/api/tasks",
              postJson(bearer, `{"payload":${payload},"request_id":"p${index}"}`)
            )
            assert.strictEqual(reply.status, 201, reply.body)
            receipts.push(SubmitReply(reply.body).receipt)
          }
          assert.deepStrictEqual(
            receipts.map((receipt) => receipt.payload_sha256),
            payloads.map((payload) => jcsSha256(JSON.parse(payload)))
          )
          const withProto = receipts[1]
          if (withProto === undefined) return assert.fail("no receipt")
          const stored = yield* Effect.orDie(store.record(withProto.task_id))
          assert.deepStrictEqual(Object.getOwnPropertyDescriptor(stored.payload, "__proto__")?.value, {
            admin: true
          })
          assert.strictEqual(Object.getPrototypeOf(stored.payload), Object.prototype)
          // The same request id with only the __proto__ member changed: 409.
          const conflict = yield* call(
            "/api/tasks",
            postJson(bearer, `{"payload":${payloads[0]},"request_id":"p1"}`)
          )
          assert.strictEqual(conflict.status, 409)
          assert.strictEqual(errorTag(conflict), "ConflictError")
        })
      )
  )
})

describe("dashboard API: routes", () => {
  it.live("submit → 201; the same again → 200 with the same receipt; another payload → 409", () =>
    withDashboard(({ call, bearer, port, store }) =>
      Effect.gen(function* () {
        const origin = { origin: `http://127.0.0.1:${port}` }
        const first = yield* call(
          "/api/tasks",
          postJson(
            { ...bearer, ...origin },
            jsonBody({ payload: { provider: "ollama", model: "m", prompt: "p" }, request_id: "req-1" })
          )
        )
        assert.strictEqual(first.status, 201, first.body)
        const created = SubmitReply(first.body)
        assert.strictEqual(created.task.state, "queued")
        assert.strictEqual(created.task.provider, "ollama")
        assert.strictEqual(created.task.client_request_id, "req-1")
        const again = yield* call(
          "/api/tasks",
          postJson(
            bearer,
            jsonBody({ request_id: "req-1", payload: { prompt: "p", model: "m", provider: "ollama" } })
          )
        )
        assert.strictEqual(again.status, 200)
        assert.deepStrictEqual(SubmitReply(again.body).receipt, created.receipt)
        const conflict = yield* call(
          "/api/tasks",
          postJson(bearer, jsonBody({ request_id: "req-1", payload: { prompt: "other" } }))
        )
        assert.strictEqual(conflict.status, 409)
        assert.strictEqual(errorTag(conflict), "ConflictError")
        // No request id: a fresh one each time.
        const a = SubmitReply((yield* call("/api/tasks", postJson(bearer, jsonBody({ payload: {} })))).body)
        const b = SubmitReply((yield* call("/api/tasks", postJson(bearer, jsonBody({ payload: {} })))).body)
        assert.notStrictEqual(a.receipt.task_id, b.receipt.task_id)
        assert.match(a.task.client_request_id, /^dashboard-[0-9a-f]{24}$/)
        assert.strictEqual((yield* store.check).records, 3)
      })
    )
  )

  it.live("list filters by state, provider and text, newest first, a page at a time", () =>
    withDashboard(({ call, bearer, store }) =>
      Effect.gen(function* () {
        const ids: Array<TaskId> = []
        for (let i = 0; i < 5; i++) {
          const receipt = yield* store.submit({
            clientRequestId: ClientRequestId.make(`Nightly-${i}`),
            payload: i % 2 === 0 ? { provider: "codex", model: "m", prompt: "p" } : {}
          })
          ids.push(receipt.task_id)
          yield* Effect.sleep("5 millis")
        }
        const oldest = ids[0]
        if (oldest === undefined) return assert.fail("no task")
        yield* store.cancel(oldest, (yield* store.record(oldest)).payload_sha256)
        const all = ListReply((yield* call("/api/tasks", { headers: bearer })).body)
        assert.deepStrictEqual(
          all.tasks.map((t) => t.task_id),
          [...ids].reverse()
        )
        const codex = ListReply((yield* call("/api/tasks?provider=codex&limit=2", { headers: bearer })).body)
        assert.deepStrictEqual(
          codex.tasks.map((t) => t.task_id),
          [ids[4], ids[2]]
        )
        assert.isNotNull(codex.next_cursor)
        const rest = ListReply(
          (yield* call(
            `/api/tasks?provider=codex&limit=2&cursor=${encodeURIComponent(codex.next_cursor ?? "")}`,
            { headers: bearer }
          )).body
        )
        assert.deepStrictEqual(
          rest.tasks.map((t) => t.task_id),
          [ids[0]]
        )
        assert.isNull(rest.next_cursor)
        const cancelled = ListReply((yield* call("/api/tasks?state=cancelled", { headers: bearer })).body)
        assert.deepStrictEqual(
          cancelled.tasks.map((t) => t.task_id),
          [ids[0]]
        )
        const text = ListReply((yield* call("/api/tasks?q=nightly-3", { headers: bearer })).body)
        assert.deepStrictEqual(
          text.tasks.map((t) => t.task_id),
          [ids[3]]
        )
      })
    )
  )

  it.live("one task shows the whole record; cancel: queued → cancelled, running → cancel_requested", () =>
    withDashboard(({ call, bearer, store }) =>
      Effect.gen(function* () {
        const queued = yield* store.submit({
          clientRequestId: ClientRequestId.make("q"),
          payload: { secret: "shown" }
        })
        const running = yield* store.submit({ clientRequestId: ClientRequestId.make("r"), payload: {} })
        const claimed = yield* store.claim(running.task_id, { workerId: "w-7", leaseMillis: 60_000 })
        assert.isTrue(Option.isSome(claimed))
        const detail = TaskReply((yield* call(`/api/tasks/${queued.task_id}`, { headers: bearer })).body)
        assert.deepStrictEqual(detail.task.payload, { secret: "shown" })
        assert.strictEqual(detail.task.payload_sha256, queued.payload_sha256)
        const cancelQueued = yield* call(`/api/tasks/${queued.task_id}/cancel`, {
          method: "POST",
          headers: bearer
        })
        assert.strictEqual(cancelQueued.status, 200)
        assert.deepStrictEqual(CancelReply(cancelQueued.body).outcome, {
          task_id: queued.task_id,
          cancelled: true,
          cancel_requested: false,
          state: "cancelled"
        })
        const cancelRunning = yield* call(`/api/tasks/${running.task_id}/cancel`, {
          method: "POST",
          headers: bearer
        })
        assert.deepStrictEqual(CancelReply(cancelRunning.body).outcome, {
          task_id: running.task_id,
          cancelled: false,
          cancel_requested: true,
          state: "running"
        })
        const after = TaskReply((yield* call(`/api/tasks/${running.task_id}`, { headers: bearer })).body)
        assert.isString(after.task.cancel_requested_at)
        assert.strictEqual(after.task.lease?.worker_id, "w-7")
        const unknown = yield* call(`/api/tasks/${"c".repeat(64)}/cancel`, {
          method: "POST",
          headers: bearer
        })
        assert.strictEqual(unknown.status, 404)
      })
    )
  )

  it.live(
    "health: minimal without a token; with it, store, counts, and workers from the registry and the leases",
    () =>
      withDashboard(({ call, bearer, store, root }) =>
        Effect.gen(function* () {
          const anonymous = yield* call("/api/health")
          assert.strictEqual(anonymous.status, 200)
          assert.deepStrictEqual(JSON.parse(anonymous.body), { status: "ok", version: "0.1.0" })
          const a = yield* store.submit({ clientRequestId: ClientRequestId.make("a"), payload: {} })
          const b = yield* store.submit({ clientRequestId: ClientRequestId.make("b"), payload: {} })
          yield* store.submit({ clientRequestId: ClientRequestId.make("c"), payload: {} })
          const now = Date.now()
          const entry = (
            digit: string,
            workerId: string,
            seenAt: number,
            extra: Partial<WorkerPresence> = {}
          ) => presenceAt(digit, workerId, seenAt, { pid: 1, ...extra })
          // An idle watcher, one killed a minute ago, one running a task, and a one-shot pass.
          const idle = entry("a", "idle", now)
          const gone = entry("b", "gone", now - 60_000)
          const claimed = yield* store.claim(a.task_id, { workerId: "busy", leaseMillis: 60_000 })
          const lease = Option.getOrThrow(claimed).lease
          const busy = entry("c", "busy", now, { hostname: lease.host, pid: lease.pid, running: 1 })
          yield* Effect.forEach([idle, gone, busy], store.workers.announce, { discard: true })
          const pass = Option.getOrThrow(
            yield* store.claim(b.task_id, { workerId: "pass-1", leaseMillis: 60_000 })
          )

          const health = HealthReply((yield* call("/api/health", { headers: bearer })).body)
          assert.deepStrictEqual(health.store, { kind: "file", root })
          assert.deepStrictEqual(health.counts, {
            queued: 1,
            running: 2,
            complete: 0,
            failed: 0,
            cancelled: 0
          })
          const registered = (
            presence: WorkerPresence,
            state: "watching" | "late",
            running: ReadonlyArray<string>
          ) => ({
            worker_id: presence.worker_id,
            instance: presence.instance,
            hostname: presence.hostname,
            pid: presence.pid,
            state,
            version: "0.1.0",
            started_at: presence.started_at,
            last_heartbeat_at: presence.seen_at,
            heartbeat_expires_at: presence.expires_at,
            concurrency: 2,
            running,
            lease_expires_at: running.length > 0 ? lease.expires_at : null
          })
          assert.deepStrictEqual(health.workers, [
            registered(busy, "watching", [a.task_id]),
            registered(gone, "late", []),
            registered(idle, "watching", []),
            {
              worker_id: "pass-1",
              instance: null,
              hostname: pass.lease.host,
              pid: pass.lease.pid,
              state: "unannounced",
              version: null,
              started_at: null,
              last_heartbeat_at: null,
              heartbeat_expires_at: null,
              concurrency: null,
              running: [b.task_id],
              lease_expires_at: pass.lease.expires_at
            }
          ])
          assert.isNull(health.registry_error)
          // The page's cheap refresh: the same workers, without the counts.
          const alone = WorkersReply((yield* call("/api/workers", { headers: bearer })).body)
          assert.deepStrictEqual(alone, { workers: health.workers, registry_error: null })
          assert.strictEqual((yield* call("/api/workers")).status, 401)
        })
      )
  )

  it.live("events: a submit shows up on the stream as event: task", () =>
    withDashboard(({ port, token, store }) =>
      Effect.gen(function* () {
        const stream = yield* Effect.acquireRelease(
          Effect.async<{ readonly response: http.IncomingMessage; readonly request: http.ClientRequest }>(
            (resume) => {
              const req = http.request(
                {
                  host: "127.0.0.1",
                  port,
                  path: "/api/events",
                  headers: { authorization: `Bearer ${token}` }
                },
                (response) => resume(Effect.succeed({ response, request: req }))
              )
              req.end()
            }
          ),
          ({ request: req }) => Effect.sync(() => req.destroy())
        )
        assert.strictEqual(stream.response.statusCode, 200)
        assert.match(stream.response.headers["content-type"] ?? "", /^text\/event-stream/)
        assertSecurityHeaders({ status: 200, headers: stream.response.headers, body: "" }, "/api/events")
        const received: Array<string> = []
        stream.response.on("data", (chunk: Buffer) => received.push(chunk.toString("utf8")))
        // The stream subscribes as it starts: submit until an event names a submitted task.
        const submitted: Array<string> = []
        for (let i = 0; i < 20; i++) {
          const receipt = yield* store.submit({ clientRequestId: ClientRequestId.make(`e${i}`), payload: {} })
          submitted.push(receipt.task_id)
          yield* Effect.sleep("100 millis")
          if (submitted.some((id) => received.join("").includes(id))) break
        }
        const text = received.join("")
        assert.match(text, /^: connected\n\n/)
        const frame = /event: task\ndata: (\{[^\n]*\})\n\n/.exec(text)
        assert.isNotNull(frame, text)
        const data = yield* Schema.decodeUnknown(
          Schema.parseJson(
            Schema.Struct({ task_id: Schema.String, state: Schema.String, updated_at: Schema.String })
          )
        )(frame?.[1] ?? "")
        assert.include(submitted, data.task_id)
        assert.strictEqual(data.state, "queued")
      })
    )
  )

  it.live("audit (newest first, filtered), stats and doctor", () =>
    withDashboard(({ call, bearer, store, audit }) =>
      Effect.gen(function* () {
        const entry = (time: string, tool: string, status: "ok" | "error") => ({
          time,
          server: "relaykeep-tasks",
          tool,
          status,
          duration_ms: 3,
          arguments: {},
          error: null
        })
        yield* audit.append(entry("2026-01-01T00:00:00.000Z", "submit", "ok"))
        yield* audit.append(entry("2026-01-02T00:00:00.000Z", "read", "error"))
        yield* audit.append(entry("2026-01-03T00:00:00.000Z", "submit", "ok"))
        const all = AuditReply((yield* call("/api/audit", { headers: bearer })).body)
        assert.deepStrictEqual(
          all.entries.map((e) => e.time.slice(0, 10)),
          ["2026-01-03", "2026-01-02", "2026-01-01"]
        )
        const submits = AuditReply(
          (yield* call("/api/audit?tool=submit&outcome=ok&limit=1", { headers: bearer })).body
        )
        assert.deepStrictEqual(
          submits.entries.map((e) => e.time.slice(0, 10)),
          ["2026-01-03"]
        )
        const since = AuditReply((yield* call("/api/audit?since=2026-01-02", { headers: bearer })).body)
        assert.strictEqual(since.entries.length, 2)

        const a = yield* store.submit({ clientRequestId: ClientRequestId.make("s1"), payload: {} })
        yield* store.submit({ clientRequestId: ClientRequestId.make("s2"), payload: {} })
        yield* store.cancel(a.task_id, a.payload_sha256)
        const stats = StatsReply((yield* call("/api/stats", { headers: bearer })).body)
        assert.deepStrictEqual(stats.hour, { submitted: 2, complete: 0, failed: 0, cancelled: 1 })
        assert.deepStrictEqual(stats.day, stats.hour)
        assert.strictEqual(stats.buckets.length, 24)
        const last = stats.buckets[23]
        assert.strictEqual(last?.submitted, 2)
        assert.isTrue((last?.start ?? "") <= stats.now)

        const doctor = DoctorReply((yield* call("/api/doctor", { headers: bearer })).body)
        assert.deepStrictEqual(
          doctor.providers.map((p) => p.provider),
          ["claude", "codex", "ollama", "openai"]
        )
      })
    )
  )
})
