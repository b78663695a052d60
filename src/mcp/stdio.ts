/**
 * Serving over stdio, through our LineTransport (strict JSON, bounded lines). stdout carries
 * JSON-RPC only (logs go to stderr, see bin/), and the server ends when stdin closes, which a
 * transport does not notice by itself.
 */
import { Effect } from "effect"
import type { ServerSpec } from "./server.js"
import { makeMcpServer } from "./server.js"
import { LineTransport } from "./stdioTransport.js"

export const serveStdio = <R>(spec: ServerSpec<R>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const { server, drain, notifyTaskChanges } = yield* makeMcpServer(spec)
      const transport = new LineTransport()
      yield* Effect.acquireRelease(
        Effect.promise(() => server.connect(transport)),
        () => Effect.promise(() => server.close()).pipe(Effect.ignore)
      )
      yield* notifyTaskChanges
      yield* Effect.logDebug(`${spec.name} serving on stdio`)
      yield* Effect.async<void>((resume) => {
        const done = () => resume(Effect.void)
        process.stdin.once("end", done)
        process.stdin.once("close", done)
        server.onclose = done
        return Effect.sync(() => {
          process.stdin.off("end", done)
          process.stdin.off("close", done)
        })
      })
      // A call that arrived just before stdin closed is still answered and audited: wait for
      // the handlers, then one turn of the event loop for their responses to be written.
      yield* drain
      yield* Effect.async<void>((resume) => {
        setImmediate(() => resume(Effect.void))
      })
    })
  )
