import { Command, Options } from "@effect/cli"
import { Effect, Layer } from "effect"
import { auditLayer, integerBetween, resolveRoot, resolveStore, storeLayer, storeOptions } from "./options.js"
import { httpClientLayer } from "./providerOptions.js"

// Loaded when the dashboard runs: the HTTP server and its routes, which no other command needs.
const dashboardModule = Effect.promise(() => import("../dashboard/main.js"))

const port = integerBetween("port", 0, 65535).pipe(
  Options.withDescription("The port on 127.0.0.1 (0 picks a free one)"),
  Options.withDefault(8787)
)

const keepToken = Options.boolean("keep-token").pipe(
  Options.withDescription(
    "Reuse the token in <root>/dashboard.token, and so the last start's URL (without it, each start draws a new token and the old URL stops working)"
  )
)

export const dashboard = Command.make("dashboard", { ...storeOptions, port, keepToken }, (args) =>
  Effect.gen(function* () {
    const chosen = yield* resolveStore(args)
    // The token lives in the data root even when the queue is in PostgreSQL.
    const root = yield* resolveRoot(args.root)
    const module = yield* dashboardModule
    return yield* module.runDashboard({
      root,
      keepToken: args.keepToken,
      store:
        chosen._tag === "file"
          ? { kind: "file", root: chosen.root }
          : { kind: "postgres", schema: chosen.target.schema, queue: chosen.target.queue }
    })
  })
).pipe(
  Command.withDescription(
    "Serve the dashboard and its API on 127.0.0.1; prints the URL to open, with a new token in its #fragment (--keep-token reuses the last one)."
  ),
  Command.provide((args) =>
    Layer.mergeAll(storeLayer(args), auditLayer(args.root), httpClientLayer).pipe(
      Layer.provideMerge(
        Layer.unwrapEffect(Effect.map(dashboardModule, (module) => module.serverLayer(args.port)))
      )
    )
  )
)
