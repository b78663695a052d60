import { Command } from "@effect/cli"
import { Effect } from "effect"
import { TaskStore } from "../services/TaskStore.js"
import { printJson } from "./output.js"
import { storeLayer, storeOptions } from "./options.js"

export const check = Command.make("check", storeOptions, () =>
  Effect.gen(function* () {
    const store = yield* TaskStore
    const report = yield* store.check
    yield* printJson({ ok: report.invalid_records.length === 0, ...report })
  })
).pipe(
  Command.withDescription("Read every record and list every damaged one (a full scan)."),
  Command.provide((args) => storeLayer(args))
)
