/** The TaskStore port over PostgreSQL (docs/scaling.md). */
import { Effect, Layer } from "effect"
import type { InvalidInput } from "../../domain/errors.js"
import type { Host } from "../../services/Host.js"
import { TaskStore } from "../../services/TaskStore.js"
import type { PgStoreOptions } from "./target.js"
import { pgTarget } from "./target.js"

/**
 * PostgreSQL: one queue (`options.queue`) in one schema of a database that many clients and
 * workers share. Connects and migrates on the first operation; fails at once, changing
 * nothing, when the options do not validate. Its driver is loaded only when it is used (the
 * store module is imported dynamically), so the default file store starts as fast as before.
 */
export const pgTaskStoreLayer = (options: PgStoreOptions): Layer.Layer<TaskStore, InvalidInput, Host> =>
  Layer.scoped(
    TaskStore,
    Effect.gen(function* () {
      const target = yield* pgTarget(options)
      const { makePgTaskStore } = yield* Effect.promise(() => import("./PgTaskStore.js"))
      return yield* makePgTaskStore({
        target,
        maxConnections: options.maxConnections,
        connectTimeoutMillis: options.connectTimeoutMillis,
        maxPayloadBytes: options.maxPayloadBytes
      })
    })
  )
