import { Command } from "@effect/cli"
import { Layer } from "effect"
import { serveStdio } from "../mcp/stdio.js"
import { tasksServer } from "../mcp/tasks/server.js"
import { auditLayer, storeLayer, storeOptions } from "./options.js"

export const tasks = Command.make("tasks", storeOptions, () => serveStdio(tasksServer)).pipe(
  Command.withDescription("Serve the relaykeep-tasks MCP server on stdio (submit, read, cancel, list)."),
  Command.provide((args) => Layer.merge(storeLayer(args), auditLayer(args.root)))
)
