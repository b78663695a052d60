import { Command } from "@effect/cli"
import { Layer } from "effect"
import { mcpTasksLayer } from "../mcp/taskEngine.js"
import { serveMcp } from "./serveMcp.js"
import { auditLayer, storeLayer, storeOptions } from "./options.js"

export const tasks = Command.make("tasks", storeOptions, () =>
  serveMcp(() => import("../mcp/tasks/server.js").then((server) => server.tasksServer))
).pipe(
  Command.withDescription(
    "Serve the relaykeep-tasks MCP server on stdio (submit, read, cancel, list, and MCP tasks)."
  ),
  Command.provide((args) =>
    Layer.merge(mcpTasksLayer.pipe(Layer.provideMerge(storeLayer(args))), auditLayer(args.root))
  )
)
