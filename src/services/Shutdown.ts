/**
 * Stop requests (SIGINT, SIGTERM) as a service. A program that drains gracefully — the
 * watching worker — declares so with `handle` for as long as its scope lasts; it then sees the
 * first signal as `requested` and a second as `forced`. While nobody handles them, a signal
 * interrupts the program at once, as a CLI user expects of Ctrl-C.
 */
import { Context, Deferred, Effect, Layer, Ref, Runtime } from "effect"
import type { Scope } from "effect"

export type StopSignal = "SIGINT" | "SIGTERM"

export class Shutdown extends Context.Tag("relaykeep/Shutdown")<
  Shutdown,
  {
    /** Take over stop signals until the scope closes. */
    readonly handle: Effect.Effect<void, never, Scope.Scope>
    /** Completes with the first signal received while handled. */
    readonly requested: Effect.Effect<StopSignal>
    /** Completes with the second. */
    readonly forced: Effect.Effect<StopSignal>
    /** Deliver a signal: what the process listeners call, and what tests call. */
    readonly signal: (signal: StopSignal) => Effect.Effect<void>
  }
>() {
  /**
   * Signals delivered by hand (tests, library users embedding a worker). `unhandled` runs
   * when a signal arrives and nobody handles it.
   */
  static readonly make = (unhandled: (signal: StopSignal) => void = () => {}) =>
    Effect.gen(function* () {
      const handlers = yield* Ref.make(0)
      const received = yield* Ref.make(0)
      const first = yield* Deferred.make<StopSignal>()
      const second = yield* Deferred.make<StopSignal>()
      const service: Shutdown["Type"] = {
        handle: Effect.acquireRelease(
          Ref.update(handlers, (n) => n + 1),
          () => Ref.update(handlers, (n) => n - 1)
        ),
        requested: Deferred.await(first),
        forced: Deferred.await(second),
        signal: (signal) =>
          Effect.gen(function* () {
            if ((yield* Ref.get(handlers)) === 0) return yield* Effect.sync(() => unhandled(signal))
            const count = yield* Ref.updateAndGet(received, (n) => n + 1)
            yield* Deferred.succeed(count === 1 ? first : second, signal)
          })
      }
      return service
    })

  /** Signals by hand only: nothing listens to the process. */
  static readonly layerManual = Layer.effect(Shutdown, Shutdown.make())

  /**
   * The process's SIGINT and SIGTERM, for as long as the layer lives. `unhandled` is how the
   * program is stopped when nobody drains (the bin interrupts its main fiber).
   */
  static readonly layerProcess = (unhandled: (signal: StopSignal) => void) =>
    Layer.scoped(
      Shutdown,
      Effect.gen(function* () {
        const service = yield* Shutdown.make(unhandled)
        const runtime = yield* Effect.runtime<never>()
        const listener = (signal: StopSignal) => {
          Runtime.runFork(runtime)(service.signal(signal))
        }
        yield* Effect.acquireRelease(
          Effect.sync(() => {
            process.on("SIGINT", listener)
            process.on("SIGTERM", listener)
          }),
          () =>
            Effect.sync(() => {
              process.removeListener("SIGINT", listener)
              process.removeListener("SIGTERM", listener)
            })
        )
        return service
      })
    )
}
