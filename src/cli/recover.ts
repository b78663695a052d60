import { Command } from "@effect/cli"
import { Effect } from "effect"
import { reapOrphans } from "../worker/reap.js"
import { printJson } from "./output.js"
import { storeLayer, storeOptions } from "./options.js"

export const recover = Command.make("recover", storeOptions, () =>
  Effect.flatMap(reapOrphans, printJson)
).pipe(
  Command.withDescription(
    "Reap orphans now: running tasks whose worker is gone go back to the queue while attempts remain, else fail with worker_lost. Prints what was done."
  ),
  Command.provide((args) => storeLayer(args))
)
