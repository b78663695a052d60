#!/usr/bin/env node
import { main } from "./main.js"

// `relaykeep-memory ARGS` is `relaykeep memory serve ARGS`: an MCP server on stdio.
const [runtime = "node", script = "relaykeep-memory", ...rest] = process.argv
main([runtime, script, "memory", "serve", ...rest])
