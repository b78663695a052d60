/**
 * A dashboard served in this process on a free port of 127.0.0.1, over a memory store (or a file
 * store in its temp root), for the tests of test/dashboard/ that talk to it over a real HTTP connection. Every reply is checked
 * for the security headers (and for the absence of any Set-Cookie) by `call`.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { assert } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import { serveDashboard } from "../../src/dashboard/server.js"
import { freshToken } from "../../src/dashboard/token.js"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogMemoryLayer } from "../../src/mcp/auditLayer.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { RequestOptions } from "./http.js"
import { assertSecurityHeaders, request } from "./http.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"
import { fileStoreAt } from "./stores.js"

const Setup = Layer.mergeAll(memoryTaskStoreLayer(), auditLogMemoryLayer, NodeHttpClient.layer).pipe(
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provideMerge(Host.layerTest({}))
)

export interface DashboardSetup {
  /** `file`: a real file store under the dashboard's temp root, as `relaykeep dashboard` opens one. */
  readonly store?: "memory" | "file"
}

/** A dashboard on a fresh store, serving three page files from a temp directory. */
export const withDashboard = <A, E>(
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
  }) => Effect.Effect<A, E, Scope.Scope>,
  setup: DashboardSetup = {}
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
      const store = setup.store === "file" ? yield* fileStoreAt(root) : yield* TaskStore
      const url = new URL(
        yield* serveDashboard({ token, root, store: { kind: "file", root }, assetsDir }).pipe(
          Effect.provideService(TaskStore, store)
        )
      )
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

export const jsonBody = (value: unknown) => JSON.stringify(value)
export const postJson = (headers: Readonly<Record<string, string>>, body: string): RequestOptions => ({
  method: "POST",
  headers: { ...headers, "content-type": "application/json" },
  body
})
