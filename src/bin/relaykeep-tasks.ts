#!/usr/bin/env node
import { main } from "./main.js"

// `relaykeep-tasks ARGS` is `relaykeep tasks ARGS`: an MCP server on stdio.
const [runtime = "node", script = "relaykeep-tasks", ...rest] = process.argv
main([runtime, script, "tasks", ...rest])
