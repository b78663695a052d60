import { Effect } from "effect"
import { UnknownProvider } from "../domain/errors.js"
import type { ProviderError, ProviderResult, ProviderTask } from "../services/Provider.js"

/** One provider: the name payloads use in `provider` (undefined: payloads without the key). */
export interface ProviderDefinition {
  readonly name: string
  readonly handlesPayloadsWithoutProvider?: boolean
  readonly run: (task: ProviderTask) => Effect.Effect<ProviderResult, ProviderError>
}

export const makeRegistry = (providers: ReadonlyArray<ProviderDefinition>) => {
  const byName = new Map(providers.map((provider) => [provider.name, provider]))
  const fallback = providers.find((provider) => provider.handlesPayloadsWithoutProvider)
  const names = providers.map((provider) => provider.name)
  return {
    names,
    run: (task: ProviderTask) =>
      Effect.suspend(() => {
        const requested: unknown = task.payload["provider"]
        const provider =
          requested === undefined
            ? fallback
            : typeof requested === "string"
              ? byName.get(requested)
              : undefined
        return provider
          ? provider.run(task)
          : Effect.fail(
              new UnknownProvider({
                provider: typeof requested === "string" ? requested : JSON.stringify(requested ?? null),
                available: names
              })
            )
      })
  }
}
