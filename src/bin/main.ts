/**
 * Shared by the bins: compose the live layers once, run the CLI, report a failure in one line.
 *
 * The runner is ours rather than NodeRuntime.runMain so that stop signals go through the
 * Shutdown service: a watching worker drains on the first SIGINT/SIGTERM and stops at once
 * on the second; every other command is interrupted by the first, as runMain would.
 */
import { Cause, Effect, Exit, Layer, Logger, Option } from "effect"
import type { Fiber } from "effect"
import { runCli } from "../cli/main.js"
import { redactedStderrLogger } from "../cli/redactedLogger.js"
import { redactMessage } from "../domain/redact.js"
import { nodeContextLayer } from "../platform/nodeFiles.js"
import { Host } from "../services/Host.js"
import { Shutdown } from "../services/Shutdown.js"

/** The exit code of a process stopped by a signal it did not drain: 128 + SIGINT. */
const InterruptedExitCode = 130

export const main = (argv: ReadonlyArray<string>) => {
  // The main fiber, once forked: what an undrained signal interrupts.
  const running: { fiber?: Fiber.RuntimeFiber<unknown, unknown> } = {}
  let interruptedBySignal = false
  const Live = Layer.mergeAll(
    Host.layer,
    Shutdown.layerProcess(() => {
      interruptedBySignal = true
      running.fiber?.unsafeInterruptAsFork(running.fiber.id())
    }),
    // Every log goes to stderr, scrubbed: stdout belongs to JSON output and to JSON-RPC.
    Logger.replace(Logger.defaultLogger, redactedStderrLogger)
  ).pipe(Layer.provideMerge(nodeContextLayer))

  // An Effect waiting on a signal holds no handle of Node's event loop; this one does.
  const keepAlive = setInterval(() => {}, 2 ** 31 - 1)
  const fiber = Effect.runFork(
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
    )
  )
  running.fiber = fiber
  fiber.addObserver((exit) => {
    clearInterval(keepAlive)
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
      process.stderr.write(redactMessage(`relaykeep: unexpected failure: ${Cause.pretty(exit.cause)}\n`))
      process.exitCode = 1
    }
    if (interruptedBySignal) process.exit(InterruptedExitCode)
  })
}
