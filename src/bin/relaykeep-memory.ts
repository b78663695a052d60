#!/usr/bin/env node
import { launch } from "./launch.js"

// `relaykeep-memory ARGS` is `relaykeep memory serve ARGS`: an MCP server on stdio.
const [runtime = "node", script = "relaykeep-memory", ...rest] = process.argv
launch([runtime, script, "memory", "serve", ...rest])
