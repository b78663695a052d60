import { Command, Options } from "@effect/cli"
import { Effect, Either, Option } from "effect"
import { readGroup } from "../broadcast/read.js"
import { InvalidInput } from "../domain/errors.js"
import { PayloadSha256, TaskId } from "../domain/ids.js"
import { decodeField } from "../domain/input.js"
import { TaskStore } from "../services/TaskStore.js"
import { printJson } from "./output.js"
import { DurationMillis, storeLayer, storeOptions } from "./options.js"

export const taskId = Options.text("task-id").pipe(Options.withDescription("The task_id from the receipt"))
export const sha = Options.text("sha").pipe(Options.withDescription("The payload_sha256 from the receipt"))

export const decodeReceiptArgs = (args: { readonly taskId: string; readonly sha: string }) =>
  Effect.all([decodeField("--task-id", TaskId)(args.taskId), decodeField("--sha", PayloadSha256)(args.sha)])

const group = Options.text("group").pipe(
  Options.withDescription("The group_id of a broadcast's group receipt: print every member side by side")
)
const wait = Options.text("wait").pipe(
  Options.withSchema(DurationMillis("--wait")),
  Options.withDescription("With --group: wait this long at most (90s, 5m) for every member to finish"),
  Options.optional
)

/** `--task-id` (left) or `--group` (right), exactly one. */
const readOptions = { ...storeOptions, target: Options.orElseEither(taskId, group), sha, wait }

export const read = Command.make("read", readOptions, (args) =>
  Effect.gen(function* () {
    if (Either.isRight(args.target)) {
      const groupId = yield* decodeField("--group", TaskId)(args.target.right)
      const hash = yield* decodeField("--sha", PayloadSha256)(args.sha)
      const waitMillis = Option.getOrElse(args.wait, () => 0)
      return yield* printJson(yield* readGroup(groupId, hash, { waitMillis }))
    }
    if (Option.isSome(args.wait))
      return yield* new InvalidInput({ field: "--wait", reason: "applies to --group only" })
    const [id, hash] = yield* decodeReceiptArgs({ taskId: args.target.left, sha: args.sha })
    const store = yield* TaskStore
    yield* printJson(yield* store.read(id, hash))
  })
).pipe(
  Command.withDescription(
    "Print a task's state, result, error and attempts, or with --group a broadcast's members side by side. Repeatable; changes nothing."
  ),
  Command.provide((args) => storeLayer(args))
)
