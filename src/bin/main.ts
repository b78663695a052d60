/** Shared by the bins: compose the live layers once, run the CLI, report a failure in one line. */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Logger, Option } from "effect"
import { runCli } from "../cli/main.js"
import { Host } from "../services/Host.js"

const Live = Layer.mergeAll(
  Host.layer,
  NodeHttpClient.layer,
  Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true }))
).pipe(Layer.provideMerge(NodeContext.layer))

export const main = (argv: ReadonlyArray<string>) =>
  NodeRuntime.runMain(
    runCli(argv).pipe(
      Effect.tap(
        Option.match({
          onNone: () => Effect.void,
          onSome: (failure) =>
            Effect.sync(() => {
              process.stderr.write(`${failure.line}\n`)
              process.exitCode = failure.exitCode
            })
        })
      ),
      Effect.provide(Live)
    ),
    // runMain's own pretty logger writes to stdout, which belongs to JSON-RPC in a stdio
    // server; our logger (above) writes to stderr instead.
    { disableErrorReporting: true, disablePrettyLogger: true }
  )
