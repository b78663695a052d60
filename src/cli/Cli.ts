import { Command } from "@effect/cli"
import { cancel } from "./cancel.js"
import { audit } from "./audit.js"
import { check } from "./check.js"
import { dashboard } from "./dashboard.js"
import { demo } from "./demo.js"
import { doctor } from "./doctor.js"
import { gc } from "./gc.js"
import { list } from "./list.js"
import { memory } from "./memory.js"
import { migrate } from "./migrate.js"
import { read } from "./read.js"
import { recover } from "./recover.js"
import { submit } from "./submit.js"
import { tasks } from "./tasks.js"
import { worker } from "./worker.js"
import { workers } from "./workers.js"
import { Version } from "../version.js"
import { runCommand } from "./runCommand.js"

export const relaykeep = Command.make("relaykeep").pipe(
  Command.withDescription("Hand tasks to a durable local queue and read their results back by id."),
  Command.withSubcommands([
    submit,
    read,
    cancel,
    worker,
    workers,
    recover,
    list,
    check,
    gc,
    migrate,
    tasks,
    memory,
    audit,
    doctor,
    dashboard,
    demo
  ])
)

export const run = runCommand(relaykeep, { name: "relaykeep", version: Version })
