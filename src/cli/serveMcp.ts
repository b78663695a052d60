import { Effect } from "effect"
import type { ServerSpec } from "../mcp/server.js"

/**
 * Serve an MCP server on stdio. The MCP SDK and the server's tools (whose JSON Schemas are built
 * when they are defined) are loaded here, when a server starts, so that the commands that do
 * not serve (`read`, `submit`, …) start without them.
 */
export const serveMcp = <R>(load: () => Promise<ServerSpec<R>>) =>
  Effect.flatMap(
    Effect.promise(() => Promise.all([import("../mcp/stdio.js"), load()])),
    ([stdio, spec]) => stdio.serveStdio(spec)
  )
