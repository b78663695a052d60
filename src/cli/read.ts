import { Command, Options } from "@effect/cli"
import { Effect } from "effect"
import { PayloadSha256, TaskId } from "../domain/ids.js"
import { decodeField } from "../domain/input.js"
import { TaskStore } from "../services/TaskStore.js"
import { printJson } from "./output.js"
import { storeLayer, storeOptions } from "./options.js"

export const taskId = Options.text("task-id").pipe(Options.withDescription("The task_id from the receipt"))
export const sha = Options.text("sha").pipe(Options.withDescription("The payload_sha256 from the receipt"))

export const decodeReceiptArgs = (args: { readonly taskId: string; readonly sha: string }) =>
  Effect.all([decodeField("--task-id", TaskId)(args.taskId), decodeField("--sha", PayloadSha256)(args.sha)])

export const read = Command.make("read", { ...storeOptions, taskId, sha }, (args) =>
  Effect.gen(function* () {
    const [id, hash] = yield* decodeReceiptArgs(args)
    const store = yield* TaskStore
    yield* printJson(yield* store.read(id, hash))
  })
).pipe(
  Command.withDescription("Print a task's state, result, error and attempts. Repeatable; changes nothing."),
  Command.provide((args) => storeLayer(args))
)
