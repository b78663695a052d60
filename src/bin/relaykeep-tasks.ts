#!/usr/bin/env node
import { launch } from "./launch.js"

// `relaykeep-tasks ARGS` is `relaykeep tasks ARGS`: an MCP server on stdio.
const [runtime = "node", script = "relaykeep-tasks", ...rest] = process.argv
launch([runtime, script, "tasks", ...rest])
