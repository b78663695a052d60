import { Context, Effect, Layer } from "effect"
import type {
  InvalidPayload,
  ModelMismatch,
  OutputTooLarge,
  ProviderFailed,
  ProviderTimeout,
  ProviderUnavailable,
  UnknownProvider
} from "../domain/errors.js"
import type { AttemptReceipt } from "../domain/provider.js"
import type { TaskId } from "../domain/ids.js"
import type { JsonObject } from "../domain/Task.js"

/** What a provider is asked to do: one attempt of one task. */
export interface ProviderTask {
  readonly taskId: TaskId
  readonly attempt: number
  readonly payload: JsonObject
  /**
   * Called with the process group of a provider that starts processes, once they run: the
   * worker records it so that a reaper can stop them if the worker dies.
   */
  readonly onSpawn?: ((pgid: number) => Effect.Effect<void>) | undefined
  /**
   * Called when the attempt is interrupted (a cancel, a shutdown) after its processes were
   * stopped, with the receipt of what it had done so far (output hash and size, the CLI's
   * events): an interrupted run fails with nothing, so this is how its receipt gets out.
   */
  readonly onStopped?: ((receipt: AttemptReceipt) => Effect.Effect<void>) | undefined
}

/** What a provider hands back: the task's result (a JSON value) and what the attempt did. */
export interface ProviderResult {
  readonly result: unknown
  readonly receipt?: AttemptReceipt | undefined
}

export type ProviderError =
  | UnknownProvider
  | ProviderFailed
  | InvalidPayload
  | ProviderUnavailable
  | ProviderTimeout
  | OutputTooLarge
  | ModelMismatch

/**
 * Runs one attempt of a task, chosen by the payload's `provider` key. Live layers beside the
 * providers (src/providers/layer.ts): `providersLayer(settings)`, `echoProviderLayer`,
 * `providerRegistryLayer(definitions)`.
 */
export class Provider extends Context.Tag("relaykeep/Provider")<
  Provider,
  {
    readonly names: ReadonlyArray<string>
    readonly run: (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>
  }
>() {
  /** One handler for every task, whatever its payload: for tests that script outcomes. */
  static readonly layerTest = (run: (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>) =>
    Layer.succeed(Provider, Provider.of({ names: ["test"], run: (task) => Effect.suspend(() => run(task)) }))
}
