import { memoryStoreLayer } from "../store/memoryLayer.js"
import { Command, Options } from "@effect/cli"
import { Duration, Effect, Layer } from "effect"
import { DefaultSearchTimeoutSeconds } from "../domain/memory.js"
import { MemoryStore } from "../services/MemoryStore.js"
import { printJson } from "./output.js"
import { serveMcp } from "./serveMcp.js"
import { auditLayer, duration, root } from "./options.js"

const store = Options.file("store").pipe(Options.withDescription("The memory store, a JSONL file"))
const fixture = Options.file("fixture", { exists: "yes" }).pipe(
  Options.withDescription("JSONL records to import")
)

const searchTimeout = duration("search-timeout", `${DefaultSearchTimeoutSeconds}s`).pipe(
  Options.withDescription("How long one search may run before it is stopped and answered with ToolTimeout")
)

const serve = Command.make("serve", { root, store, searchTimeout }, (args) =>
  serveMcp(() =>
    import("../mcp/memory/server.js").then((server) =>
      server.memoryServerWith({ searchTimeout: Duration.millis(args.searchTimeout) })
    )
  )
).pipe(
  Command.withDescription("Serve the read-only relaykeep-memory MCP server on stdio (search, read)."),
  Command.provide((args) => Layer.merge(memoryStoreLayer(args.store), auditLayer(args.root)))
)

const importCommand = Command.make("import", { store, fixture }, (args) =>
  Effect.gen(function* () {
    const memory = yield* MemoryStore
    yield* printJson(yield* memory.importFile(args.fixture))
  })
).pipe(
  Command.withDescription(
    "Validate every row of --fixture, then append the new ones; any bad row rejects them all."
  ),
  Command.provide((args) => memoryStoreLayer(args.store))
)

export const memory = Command.make("memory").pipe(
  Command.withDescription("The memory store and its MCP server."),
  Command.withSubcommands([serve, importCommand])
)
