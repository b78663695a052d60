import { Effect } from "effect"
import type { ProviderDefinition } from "./registry.js"

/** The built-in provider for payloads without a `provider` key: hands the payload back. */
export const echoProvider: ProviderDefinition = {
  name: "fake-echo",
  handlesPayloadsWithoutProvider: true,
  run: (task) => Effect.succeed({ result: { echo: task.payload, provider: "fake-echo" } })
}
