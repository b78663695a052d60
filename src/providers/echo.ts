import { Effect } from "effect"
import { EchoProviderName } from "../domain/provider.js"
import type { ProviderDefinition } from "./registry.js"

/** The built-in provider for payloads without a `provider` key: hands the payload back. */
export const echoProvider: ProviderDefinition = {
  name: EchoProviderName,
  handlesPayloadsWithoutProvider: true,
  run: (task) => Effect.succeed({ result: { echo: task.payload, provider: EchoProviderName } })
}
