import { Command } from "@effect/cli"
import { Effect } from "effect"
import { currentWorkers } from "../worker/registry.js"
import { printJson } from "./output.js"
import { storeLayer, storeOptions } from "./options.js"

export const workers = Command.make("workers", storeOptions, () =>
  Effect.flatMap(currentWorkers, (found) => printJson({ workers: found }))
).pipe(
  Command.withDescription(
    "List the workers of the queue: each watching worker with its last heartbeat (late when it is overdue), and any other holding a running task."
  ),
  Command.provide((args) => storeLayer(args))
)
