#!/usr/bin/env node
import { main } from "./main.js"

// `relaykeep-worker ARGS` is `relaykeep worker ARGS`.
const [runtime = "node", script = "relaykeep-worker", ...rest] = process.argv
main([runtime, script, "worker", ...rest])
