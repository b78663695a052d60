/**
 * What `relaykeep dashboard` loads when it runs (and no other command): the Node HTTP server on
 * 127.0.0.1, the token, and the program that serves until it is interrupted.
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Console, Effect, Layer } from "effect"
import { createServer } from "node:http"
import { fileURLToPath } from "node:url"
import { ServeFailed } from "./errors.js"
import type { StoreInfo } from "./routes.js"
import { serveDashboard } from "./server.js"
import { startToken } from "./token.js"

/**
 * Loopback only, never 0.0.0.0: the token is a second line of defence, not the first. At
 * shutdown the open connections are cut before the server closes: Node's close() waits for
 * every connection, and one busy when it was called (a keep-alive) would hold it for seconds.
 */
export const serverLayer = (port: number) =>
  Layer.unwrapEffect(
    Effect.sync(() => {
      const server = createServer()
      const cutConnections = Layer.scopedDiscard(
        Effect.addFinalizer(() => Effect.sync(() => server.closeAllConnections()))
      )
      return cutConnections.pipe(
        Layer.provideMerge(NodeHttpServer.layer(() => server, { port, host: "127.0.0.1" })),
        Layer.mapError(
          (error) =>
            new ServeFailed({
              port,
              reason: error.cause instanceof Error ? error.cause.message : String(error.cause)
            })
        )
      )
    })
  )

/** `dist/page/`, beside `dist/dashboard/` and `dist/bundle/` (the bundle defines import.meta.url). */
export const defaultAssetsDir = () => fileURLToPath(new URL("../page/", import.meta.url))

/**
 * Serve until interrupted; print the URL (the token in its fragment) as the one line on
 * stdout. The server is already listening when this runs (its layer binds the port), so a
 * start that cannot listen leaves the token file as it was.
 */
export const runDashboard = (options: {
  readonly root: string
  readonly store: StoreInfo
  /** Reuse the token file's token (`--keep-token`) instead of drawing a new one. */
  readonly keepToken: boolean
}) =>
  Effect.scoped(
    Effect.gen(function* () {
      const token = yield* startToken(options.root, { keep: options.keepToken })
      const url = yield* serveDashboard({
        root: options.root,
        store: options.store,
        token,
        assetsDir: defaultAssetsDir()
      })
      yield* Console.log(`RelayKeep dashboard: ${url}`)
      yield* Effect.logInfo("serving until SIGINT or SIGTERM")
      return yield* Effect.never
    })
  )
