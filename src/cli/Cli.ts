import { Command } from "@effect/cli"
import { cancel } from "./cancel.js"
import { check } from "./check.js"
import { list } from "./list.js"
import { read } from "./read.js"
import { submit } from "./submit.js"
import { worker } from "./worker.js"
import { Version } from "../version.js"

export const relaykeep = Command.make("relaykeep").pipe(
  Command.withDescription("Hand tasks to a durable local queue and read their results back by id."),
  Command.withSubcommands([submit, read, cancel, worker, list, check])
)

export const run = Command.run(relaykeep, { name: "relaykeep", version: Version })
