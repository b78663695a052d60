/** The Provider port's layers: the registry of every provider, or of a chosen few. */
import { Effect, Layer } from "effect"
import { Provider } from "../services/Provider.js"
import { makeClaudeProvider } from "./claude.js"
import { makeCodexProvider } from "./codex.js"
import { echoProvider } from "./echo.js"
import { makeOllamaProvider } from "./ollama.js"
import { makeOpenAiProvider } from "./openai.js"
import type { ProviderDefinition } from "./registry.js"
import { makeRegistry } from "./registry.js"
import type { ProviderSettings } from "./settings.js"

/**
 * Every provider: echo for payloads without a `provider` key, and claude, codex, ollama and
 * openai, configured by the worker's settings (which no payload can change).
 */
export const providersLayer = (settings: ProviderSettings) =>
  Layer.effect(
    Provider,
    Effect.gen(function* () {
      return makeRegistry([
        echoProvider,
        yield* makeClaudeProvider(settings),
        yield* makeCodexProvider(settings),
        yield* makeOllamaProvider(settings),
        yield* makeOpenAiProvider(settings)
      ])
    })
  )

/** Only the echo provider: for the demo, for queues that need no model, and in memory (no process, no network). */
export const echoProviderLayer = Layer.succeed(Provider, makeRegistry([echoProvider]))

/** A registry of the given providers, for tests and library users. */
export const providerRegistryLayer = (providers: ReadonlyArray<ProviderDefinition>) =>
  Layer.succeed(Provider, makeRegistry(providers))
