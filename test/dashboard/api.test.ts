/**
 * The dashboard's API over a real HTTP connection to a server started in this process on a
 * free port of 127.0.0.1, with a memory store: every refusal of the guards (and that it changed
 * nothing, and repeated nothing it was sent), every route's happy path, the page's files, the
 * event stream, and the security headers, without any Set-Cookie, on every answer (checked by
 * `call` on each reply).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect, Layer, Option, Schema } from "effect"
import * as http from "node:http"
import { createServer } from "node:http"
import { freshToken } from "../../src/dashboard/token.js"
import { serveDashboard } from "../../src/dashboard/server.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { TaskId } from "../../src/domain/ids.js"
import { CancelOutcome, Receipt, TaskRecord, TaskSummary } from "../../src/domain/Task.js"
import type { WorkerPresence } from "../../src/domain/worker.js"
import { WorkerView } from "../../src/worker/registry.js"
import { presenceAt } from "../support/presence.js"
import { AuditLog } from "../../src/mcp/AuditLog.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { RequestOptions } from "../support/http.js"
import { assertSecurityHeaders, errorMessage, errorTag, request } from "../support/http.js"

const Setup = Layer.mergeAll(TaskStore.layerMemory(), AuditLog.layerMemory, NodeHttpClient.layer).pipe(
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provideMerge(Host.layerTest({}))
)

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

/** A dashboard on a fresh memory store, serving three page files from a temp directory. */
const withDashboard = <A, E>(
  body: (dashboard: {
    readonly token: string
    readonly port: number
    readonly root: string
    readonly store: TaskStore["Type"]
    readonly audit: AuditLog["Type"]
    readonly call: (
      path: string,
      options?: RequestOptions
    ) => Effect.Effect<Awaited<ReturnType<typeof request>>>
    readonly bearer: Readonly<Record<string, string>>
    readonly unchanged: <B, F>(effect: Effect.Effect<B, F>) => Effect.Effect<B, F>
  }) => Effect.Effect<A, E, Scope.Scope>
) =>
  Effect.scoped(
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* fs.makeTempDirectoryScoped()
      const assetsDir = path.join(root, "page")
      yield* fs.makeDirectory(assetsDir)
      yield* fs.writeFileString(path.join(assetsDir, "index.html"), "<!doctype html><title>RelayKeep</title>")
      yield* fs.writeFileString(path.join(assetsDir, "app.js"), "console.log('page')")
      yield* fs.writeFileString(path.join(assetsDir, "app.css"), "body{}")
      yield* fs.writeFileString(path.join(assetsDir, "secret.txt"), "not served")
      const token = yield* freshToken(root)
      const url = new URL(yield* serveDashboard({ token, root, store: { kind: "file", root }, assetsDir }))
      const store = yield* TaskStore
      const audit = yield* AuditLog
      const port = Number(url.port)
      const call = (target: string, options?: RequestOptions) =>
        Effect.tap(
          Effect.promise(() => request(port, target, options)),
          (reply) => assertSecurityHeaders(reply, new URL(target, "http://x").pathname)
        )
      const snapshot = Effect.all([store.list({ limit: 500 }), store.check, audit.list({})])
      const unchanged = <B, F>(effect: Effect.Effect<B, F>) =>
        Effect.gen(function* () {
          const before = yield* Effect.orDie(snapshot)
          const result = yield* effect
          assert.deepStrictEqual(yield* Effect.orDie(snapshot), before, "a refused request changed nothing")
          return result
        })
      return yield* body({
        token,
        port,
        root,
        store,
        audit,
        call,
        bearer: { authorization: `Bearer ${token}` },
        unchanged
      })
    })
  ).pipe(Effect.provide(Setup))

const jsonBody = (value: unknown) => JSON.stringify(value)
const postJson = (headers: Readonly<Record<string, string>>, body: string): RequestOptions => ({
  method: "POST",
  headers: { ...headers, "content-type": "application/json" },
  body
})

describe("dashboard API: refusals change nothing", () => {
  it.live("no token, a wrong one, or the right one in a cookie or the query → 401 on every API route", () =>
    withDashboard(({ call, token, port, store, unchanged }) =>
      Effect.gen(function* () {
        yield* store.submit({ clientRequestId: ClientRequestId.make("existing"), payload: {} })
        yield* unchanged(
          Effect.gen(function* () {
            const wrong = "0".repeat(64) === token ? "1".repeat(64) : "0".repeat(64)
            const own = { origin: `http://127.0.0.1:${port}` }
            // The cookie the dashboard set before issue 16, now with the right token: never read.
            const cookie = { cookie: `relaykeep_dashboard=${token}` }
            const refused: ReadonlyArray<readonly [string, RequestOptions]> = [
              ["/api/tasks", {}],
              ["/api/tasks", { headers: { authorization: `Bearer ${wrong}` } }],
              ["/api/tasks", { headers: { authorization: "Bearer abc" } }],
              ["/api/tasks", { headers: { authorization: `Basic ${token}` } }],
              ["/api/tasks", { headers: cookie }],
              [`/api/tasks?token=${token}`, {}],
              ["/api/events", { headers: cookie }],
              [`/api/tasks/${"a".repeat(64)}`, { headers: cookie }],
              ["/api/tasks", postJson({ ...cookie, ...own }, jsonBody({ payload: { a: 1 } }))],
              [`/api/tasks/${"a".repeat(64)}/cancel`, { method: "POST", headers: { ...cookie, ...own } }],
              ["/api/nowhere", { headers: cookie }]
            ]
            for (const [target, options] of refused) {
              const reply = yield* call(target, options)
              assert.strictEqual(reply.status, 401, `${target} ${JSON.stringify(options.headers)}`)
              assert.strictEqual(errorTag(reply), "Unauthorized")
              assert.notInclude(reply.body, token)
            }
            // Health says it is up, and no more, to a cookie as to anyone.
            const health = yield* call("/api/health", { headers: cookie })
            assert.deepStrictEqual(JSON.parse(health.body), { status: "ok", version: "0.1.0" })
          })
        )
      })
    )
  )

  it.live("the page's files are served without the token (they hold no data); nothing else is", () =>
    withDashboard(({ call, token }) =>
      Effect.gen(function* () {
        const page = yield* call("/")
        assert.strictEqual(page.status, 200)
        assert.match(page.headers["content-type"] ?? "", /^text\/html/)
        assert.include(page.body, "<title>RelayKeep</title>")
        assert.strictEqual((yield* call("/index.html")).body, page.body)
        const script = yield* call("/app.js")
        assert.match(script.headers["content-type"] ?? "", /^text\/javascript/)
        const style = yield* call("/app.css")
        assert.match(style.headers["content-type"] ?? "", /^text\/css/)
        // The printed URL of old, the token in the query: the same page, and no cookie (call checks).
        const oldLink = yield* call(`/?token=${token}`)
        assert.strictEqual(oldLink.status, 200)
        assert.strictEqual(oldLink.body, page.body)
        for (const [target, method] of [
          ["/secret.txt", "GET"],
          ["/page/index.html", "GET"],
          ["/", "POST"],
          ["/app.js", "DELETE"]
        ] as const) {
          const reply = yield* call(target, { method, headers: { authorization: `Bearer ${token}` } })
          assert.strictEqual(reply.status, 404, `${method} ${target}`)
          assert.strictEqual(errorTag(reply), "NotFound")
          assert.strictEqual(
            errorMessage(reply),
            "path: nothing is served here; the page is at / and the API under /api/"
          )
        }
      })
    )
  )

  it.live("a foreign Host, or a loopback one with another port or none → 403, even with the token", () =>
    withDashboard(({ call, bearer, port, unchanged }) =>
      unchanged(
        Effect.gen(function* () {
          for (const host of [
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil:80",
            "10.0.0.1",
            "[::2]:80",
            "127.0.0.1:99999",
            "127.0.0.1:1",
            `127.0.0.1:${port + 1}`,
            `localhost:0${port}`,
            "127.0.0.1",
            "localhost",
            `evil.example:${port}`
          ]) {
            const reply = yield* call("/api/tasks", postJson({ ...bearer, host }, jsonBody({ payload: {} })))
            assert.strictEqual(reply.status, 403, host)
            assert.strictEqual(errorTag(reply), "ForbiddenHost")
            assert.strictEqual(
              errorMessage(reply),
              `Host: must be localhost, 127.0.0.1 or [::1] with this dashboard's port, ${port}`
            )
            // Nor the page: a rebinding site gets not even the script.
            assert.strictEqual((yield* call("/app.js", { headers: { host } })).status, 403, host)
          }
          const health = yield* call("/api/health", { headers: { host: "evil.example" } })
          assert.strictEqual(health.status, 403)
          for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
            const reply = yield* call("/api/tasks", { headers: { ...bearer, host } })
            assert.strictEqual(reply.status, 200, host)
          }
        })
      )
    )
  )

  it.live(
    "a POST with a foreign Origin → 403, token or not; its own Origin, or none, with the token passes",
    () =>
      withDashboard(({ call, bearer, port, unchanged }) =>
        Effect.gen(function* () {
          yield* unchanged(
            Effect.gen(function* () {
              const body = jsonBody({ payload: { a: 1 } })
              for (const origin of [
                "http://evil.example",
                `http://localhost:${port + 1}`,
                `http://localhost:${port}`,
                "null",
                `https://127.0.0.1:${port}`
              ]) {
                for (const headers of [{ ...bearer, origin }, { origin }]) {
                  const reply = yield* call("/api/tasks", postJson(headers, body))
                  assert.strictEqual(reply.status, 403, origin)
                  assert.strictEqual(errorTag(reply), "ForbiddenOrigin")
                  assert.notInclude(reply.body, origin === "null" ? '"null"' : origin)
                }
              }
              const cancel = yield* call(`/api/tasks/${"a".repeat(64)}/cancel`, {
                method: "POST",
                headers: { ...bearer, origin: "http://evil.example" }
              })
              assert.strictEqual(cancel.status, 403)
            })
          )
          const own = yield* call(
            "/api/tasks",
            postJson({ ...bearer, origin: `http://127.0.0.1:${port}` }, "{}")
          )
          assert.strictEqual(own.status, 400, "past the guards, to the body's check")
          const viaLocalhost = yield* call(
            "/api/tasks",
            postJson(
              { ...bearer, origin: `http://localhost:${port}`, host: `localhost:${port}` },
              jsonBody({ payload: {} })
            )
          )
          assert.strictEqual(viaLocalhost.status, 201)
          const none = yield* call("/api/tasks", postJson(bearer, jsonBody({ payload: { b: 1 } })))
          assert.strictEqual(none.status, 201)
        })
      )
  )

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
            ["/api/tasks", postJson(bearer, jsonBody([secret])), "body"]
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
