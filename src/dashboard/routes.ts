/** The /api/* routes of the dashboard (docs/dashboard.md#api). Guards run before these. */
import * as HttpRouter from "@effect/platform/HttpRouter"
import { checkRequestId, checkSubmittable } from "../domain/mcpTask.js"
import { readGroupTrusted } from "../broadcast/read.js"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Clock, Effect, Option, Schedule, Schema, Stream } from "effect"
import type { Deferred } from "effect"
import { sinceMillisAt } from "../domain/duration.js"
import { ClientRequestId, TaskId } from "../domain/ids.js"
import { decodeField, decodeNamed } from "../domain/input.js"
import { JsonObject, TaskState, timeMillis, toSummary } from "../domain/Task.js"
import type { TaskSummary } from "../domain/Task.js"
import { AuditStatus } from "../domain/audit.js"
import { AuditLog } from "../services/AuditLog.js"
import { providerEnvironment, resolveProviderSettings } from "../providers/config.js"
import { diagnose } from "../providers/doctor.js"
import { Host } from "../services/Host.js"
import { TaskStore } from "../services/TaskStore.js"
import { MaxListLimit } from "../store/shared.js"
import { Version } from "../version.js"
import { readJsonBody } from "./guards.js"
import { statsOf } from "./stats.js"
import { workersOrLeases } from "../worker/registry.js"

/** What health says about the store: never a URL, so never a password. */
export type StoreInfo =
  | { readonly kind: "file"; readonly root: string }
  | { readonly kind: "postgres"; readonly schema: string; readonly queue: string }

export interface RouteOptions {
  /** The data root: the audit log and the providers' config.json live there. */
  readonly root: string
  readonly store: StoreInfo
  /** Completed when the server stops, so that open event streams end and let it close. */
  readonly stopping: Deferred.Deferred<void>
}

export const MaxPageSize = 200
const DefaultPageSize = 50
const DefaultAuditLimit = 200
const MaxAuditLimit = 5000
/** Stats look at tasks created this far back: enough for any task that finished in the last day. */
const StatsHorizonMillis = 7 * 24 * 60 * 60 * 1000
const KeepaliveInterval = "15 seconds"

const json = (body: unknown, status = 200) => HttpServerResponse.unsafeJson(body, { status })

/** Decimal digits only: `1e1`, `0x10`, ` 5` or `5.0` are refused, not read as numbers. */
const limitBetween = (max: number) => {
  const message = () => `must be a whole number from 1 to ${max}, in decimal digits`
  return Schema.compose(
    Schema.String.pipe(Schema.pattern(/^[1-9][0-9]{0,5}$/, { message })),
    Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, max, { message }))
  )
}

/** One query parameter, decoded and named in any error; absent or empty is undefined. */
const query = <A, I>(name: string, schema: Schema.Schema<A, I>) =>
  Effect.flatMap(HttpServerRequest.ParsedSearchParams, (params) => {
    const raw = params[name]
    const value = Array.isArray(raw) ? raw[0] : raw
    const given = value === undefined || value === "" ? Option.none() : Option.some(value)
    return Effect.map(
      Option.match(given, {
        onNone: () => Effect.succeedNone,
        onSome: (text) => Effect.map(decodeField(name, schema)(text), Option.some)
      }),
      Option.getOrUndefined
    )
  })

const taskIdParam = Effect.flatMap(HttpRouter.params, (params) =>
  decodeField("task_id", TaskId)(params["id"])
)

const groupIdParam = Effect.flatMap(HttpRouter.params, (params) =>
  decodeField("group_id", TaskId)(params["id"])
)

const SubmitBody = Schema.Struct({
  payload: JsonObject,
  request_id: Schema.optional(ClientRequestId)
})

export const apiRoutes = (options: RouteOptions) =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const audit = yield* AuditLog
    const host = yield* Host

    const health = Effect.gen(function* () {
      const [counts, workers] = yield* Effect.all([store.counts, workersOrLeases], { concurrency: 2 })
      return json({ status: "ok", version: Version, store: options.store, counts, ...workers })
    })

    // The workers alone, for the page to refresh them cheaply: `health` counts every task.
    const workers = Effect.map(workersOrLeases, (found) => json(found))

    const listTasks = Effect.gen(function* () {
      const page = yield* store.list({
        state: yield* query("state", TaskState),
        provider: yield* query("provider", Schema.String),
        search: yield* query("q", Schema.String),
        cursor: yield* query("cursor", Schema.String),
        limit: (yield* query("limit", limitBetween(MaxPageSize))) ?? DefaultPageSize
      })
      return json(page)
    })

    const oneTask = Effect.gen(function* () {
      const taskId = yield* taskIdParam
      return json({ task: yield* store.record(taskId) })
    })

    // The token holder may read any record, so a group needs no hash here; it is read at once,
    // never waited on: the page follows its members through the event stream instead.
    const oneGroup = Effect.gen(function* () {
      const groupId = yield* groupIdParam
      return json({ group: yield* readGroupTrusted(groupId) })
    })

    const submit = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const body = yield* Effect.flatMap(readJsonBody(request), decodeNamed("body", SubmitBody))
      const clientRequestId =
        body.request_id ??
        ClientRequestId.make(`dashboard-${Buffer.from(yield* host.randomBytes(12)).toString("hex")}`)
      const started = yield* Clock.currentTimeMillis
      yield* checkRequestId(clientRequestId, "request_id")
      yield* checkSubmittable(body.payload)
      const receipt = yield* store.submit({ clientRequestId, payload: body.payload })
      const task = toSummary(yield* store.record(receipt.task_id))
      // A task created before this request began was already there: the same receipt again.
      const created = timeMillis(receipt.created_at) >= started
      return json({ receipt, task }, created ? 201 : 200)
    })

    const cancel = Effect.gen(function* () {
      const taskId = yield* taskIdParam
      const record = yield* store.record(taskId)
      return json({ outcome: yield* store.cancel(taskId, record.payload_sha256) })
    })

    const events = Effect.sync(() => {
      const changes = store.changes.pipe(
        Stream.mapEffect((taskId) =>
          store.record(taskId).pipe(
            Effect.map((record) =>
              Option.some(
                `event: task\ndata: ${JSON.stringify({
                  task_id: record.task_id,
                  state: record.state,
                  updated_at: record.updated_at
                })}\n\n`
              )
            ),
            // A record that cannot be read now is left out; the page's next listing shows it.
            Effect.catchAll(() => Effect.succeedNone)
          )
        ),
        Stream.filterMap((frame) => frame)
      )
      const keepalive = Stream.map(
        Stream.fromSchedule(Schedule.spaced(KeepaliveInterval)),
        () => ": keepalive\n\n"
      )
      const frames = Stream.concat(Stream.make(": connected\n\n"), Stream.merge(changes, keepalive)).pipe(
        Stream.interruptWhenDeferred(options.stopping),
        Stream.encodeText
      )
      return HttpServerResponse.stream(frames, {
        contentType: "text/event-stream",
        headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
      })
    })

    const auditEntries = Effect.gen(function* () {
      const since = yield* query("since", Schema.String)
      const entries = yield* audit.list({
        tool: yield* query("tool", Schema.String),
        status: yield* query("outcome", AuditStatus),
        sinceMillis:
          since === undefined
            ? undefined
            : yield* sinceMillisAt(since, yield* Clock.currentTimeMillis, "since"),
        limit: (yield* query("limit", limitBetween(MaxAuditLimit))) ?? DefaultAuditLimit
      })
      return json({ entries: [...entries].reverse() })
    })

    const doctor = Effect.gen(function* () {
      const settings = yield* resolveProviderSettings(yield* providerEnvironment, options.root)
      return json(yield* diagnose(settings))
    })

    const stats = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const tasks: Array<TaskSummary> = []
      let cursor: string | undefined
      for (;;) {
        const page = yield* store.list({ limit: MaxListLimit, cursor })
        tasks.push(...page.tasks)
        const last = page.tasks[page.tasks.length - 1]
        if (page.next_cursor === null || last === undefined) break
        if (timeMillis(last.created_at) < now - StatsHorizonMillis) break
        cursor = page.next_cursor
      }
      return json(statsOf(tasks, now))
    })

    return HttpRouter.empty.pipe(
      HttpRouter.get("/api/health", health),
      HttpRouter.get("/api/workers", workers),
      HttpRouter.get("/api/tasks", listTasks),
      HttpRouter.post("/api/tasks", submit),
      HttpRouter.get("/api/tasks/:id", oneTask),
      HttpRouter.post("/api/tasks/:id/cancel", cancel),
      HttpRouter.get("/api/groups/:id", oneGroup),
      HttpRouter.get("/api/events", events),
      HttpRouter.get("/api/audit", auditEntries),
      HttpRouter.get("/api/doctor", doctor),
      HttpRouter.get("/api/stats", stats)
    )
  })
