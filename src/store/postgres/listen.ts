/**
 * LISTEN on a dedicated connection that reports its own death. When it breaks (a restart,
 * a failover, a network cut) the stream fails, so the caller can connect again and, since
 * notifications sent meanwhile are lost, look at the queue once more.
 */
import { Effect, Redacted, Stream } from "effect"
import pg from "pg"
import { StorageError } from "../../domain/errors.js"
import type { PgTarget } from "./target.js"

/** What the listening connection says: it is listening now, or a notification came. */
export type Heard = { readonly _tag: "listening" } | { readonly _tag: "notice"; readonly payload: string }

export const listen = (
  target: PgTarget,
  channel: string,
  connectTimeoutMillis: number
): Stream.Stream<Heard, StorageError> =>
  Stream.asyncScoped<Heard, StorageError>((emit) => {
    const broken = (reason: string) =>
      void emit.fail(new StorageError({ operation: "listen on", path: `postgres ${target.display}`, reason }))
    return Effect.gen(function* () {
      const client = yield* Effect.acquireRelease(
        Effect.sync(
          () =>
            new pg.Client({
              connectionString: Redacted.value(target.url),
              connectionTimeoutMillis: connectTimeoutMillis,
              application_name: "relaykeep listen",
              keepAlive: true
            })
        ),
        (client) =>
          // Only the wait is interruptible, so that the timeout can cut it short: the release
          // itself must run even when the stream is being interrupted.
          Effect.promise(() => client.end().catch(() => undefined)).pipe(
            Effect.interruptible,
            Effect.timeoutOption(1000)
          )
      )
      client.on("error", (error) => broken(error.message))
      client.on("end", () => broken("the connection ended"))
      client.on("notification", (message) => {
        if (message.channel === channel && message.payload !== undefined)
          void emit.single({ _tag: "notice", payload: message.payload })
      })
      yield* Effect.tryPromise({
        try: async () => {
          await client.connect()
          await client.query(`LISTEN ${client.escapeIdentifier(channel)}`)
        },
        catch: (cause) =>
          new StorageError({
            operation: "listen on",
            path: `postgres ${target.display}`,
            reason: cause instanceof Error ? cause.message : String(cause)
          })
      })
      yield* Effect.sync(() => void emit.single({ _tag: "listening" }))
    })
  })
