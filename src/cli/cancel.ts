import { Command } from "@effect/cli"
import { Effect } from "effect"
import { TaskStore } from "../services/TaskStore.js"
import { printJson } from "./output.js"
import { storeLayer, storeOptions } from "./options.js"
import { decodeReceiptArgs, sha, taskId } from "./read.js"

export const cancel = Command.make("cancel", { ...storeOptions, taskId, sha }, (args) =>
  Effect.gen(function* () {
    const [id, hash] = yield* decodeReceiptArgs(args)
    const store = yield* TaskStore
    yield* printJson(yield* store.cancel(id, hash))
  })
).pipe(
  Command.withDescription(
    "Cancel a task: a queued one at once; a running one is stopped by its worker (cancel_requested). Exits 0 either way."
  ),
  Command.provide((args) => storeLayer(args))
)
