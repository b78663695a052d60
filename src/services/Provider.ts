import { Context, Effect, Layer } from "effect"
import type { ProviderFailed, UnknownProvider } from "../domain/errors.js"
import type { TaskId } from "../domain/ids.js"
import type { JsonObject } from "../domain/Task.js"
import { echoProvider } from "../providers/echo.js"
import type { ProviderDefinition } from "../providers/registry.js"
import { makeRegistry } from "../providers/registry.js"

/** What a provider is asked to do: one attempt of one task. */
export interface ProviderTask {
  readonly taskId: TaskId
  readonly attempt: number
  readonly payload: JsonObject
}

/** What a provider hands back: the task's result, a JSON value. */
export interface ProviderResult {
  readonly result: unknown
}

export type ProviderError = UnknownProvider | ProviderFailed

/** Runs one attempt of a task, chosen by the payload's `provider` key. */
export class Provider extends Context.Tag("relaykeep/Provider")<
  Provider,
  {
    readonly names: ReadonlyArray<string>
    readonly run: (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>
  }
>() {
  /** The built-in providers. A payload without a `provider` key goes to the echo provider. */
  static readonly layer = Layer.succeed(Provider, makeRegistry([echoProvider]))

  /** A registry of the given providers, for tests and library users. */
  static readonly layerWith = (providers: ReadonlyArray<ProviderDefinition>) =>
    Layer.succeed(Provider, makeRegistry(providers))

  /** One handler for every task, whatever its payload: for tests that script outcomes. */
  static readonly layerTest = (run: (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>) =>
    Layer.succeed(Provider, Provider.of({ names: ["test"], run: (task) => Effect.suspend(() => run(task)) }))
}
