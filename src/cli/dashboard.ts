import { Command, Options } from "@effect/cli"
import { Effect, Layer } from "effect"
import { auditLayer, resolveRoot, resolveStore, storeLayer, storeOptions } from "./options.js"
import { httpClientLayer } from "./providerOptions.js"

// Loaded when the dashboard runs: the HTTP server and its routes, which no other command needs.
const dashboardModule = Effect.promise(() => import("../dashboard/main.js"))

const port = Options.integer("port").pipe(
  Options.withDescription("The port on 127.0.0.1 (0 picks a free one)"),
  Options.withDefault(8787)
)

export const dashboard = Command.make("dashboard", { ...storeOptions, port }, (args) =>
  Effect.gen(function* () {
    const chosen = yield* resolveStore(args)
    // The token lives in the data root even when the queue is in PostgreSQL.
    const root = yield* resolveRoot(args.root)
    const module = yield* dashboardModule
    return yield* module.runDashboard({
      root,
      store:
        chosen._tag === "file"
          ? { kind: "file", root: chosen.root }
          : { kind: "postgres", schema: chosen.target.schema, queue: chosen.target.queue }
    })
  })
).pipe(
  Command.withDescription(
    "Serve the dashboard and its API on 127.0.0.1; prints the URL to open, with its token."
  ),
  Command.provide((args) =>
    Layer.mergeAll(storeLayer(args), auditLayer(args.root), httpClientLayer).pipe(
      Layer.provideMerge(
        Layer.unwrapEffect(Effect.map(dashboardModule, (module) => module.serverLayer(args.port)))
      )
    )
  )
)
