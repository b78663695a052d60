import { Command } from "@effect/cli"
import { Effect, Layer } from "effect"

// Loaded when the demo runs: it brings the MCP SDK's client, which no other command needs.
const demoModule = Effect.promise(() => import("./demoProgram.js"))

export const demo = Command.make("demo", {}, () =>
  Effect.flatMap(demoModule, (module) => module.demoProgram)
).pipe(
  Command.withDescription(
    "Run the whole hand-off on a temporary root with the real MCP server; no model needed."
  ),
  Command.provide(Layer.unwrapEffect(Effect.map(demoModule, (module) => module.DemoLive)))
)
