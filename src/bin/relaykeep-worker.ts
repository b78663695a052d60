#!/usr/bin/env node
import { launch } from "./launch.js"

// `relaykeep-worker ARGS` is `relaykeep worker ARGS`.
const [runtime = "node", script = "relaykeep-worker", ...rest] = process.argv
launch([runtime, script, "worker", ...rest])
