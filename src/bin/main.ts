/** Shared by the bins: compose the live layers once, run the CLI, report a failure in one line. */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Logger, Option } from "effect"
import { runCli } from "../cli/main.js"
import { Host } from "../services/Host.js"
import { Provider } from "../services/Provider.js"

const Live = Layer.mergeAll(
  Host.layer,
  Provider.layer,
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
    { disableErrorReporting: false }
  )
