/** The tools of `relaykeep-tasks`: the queue's submit, read (with waiting), cancel and list. */
import { Clock, Duration, Effect, Queue, Schema, Stream } from "effect"
import { ClientRequestId, PayloadSha256, TaskId } from "../../domain/ids.js"
import {
  CancelOutcome,
  isTerminal,
  JsonObject,
  Receipt,
  TaskState,
  TaskSummary,
  TaskView
} from "../../domain/Task.js"
import { TaskStore } from "../../services/TaskStore.js"
import { MaxListLimit } from "../../store/shared.js"
import { defineTool } from "../Tool.js"

const ReceiptArgs = {
  task_id: TaskId.annotations({ description: "task_id from the receipt" }),
  payload_sha256: PayloadSha256.annotations({ description: "payload_sha256 from the receipt" })
}

export const MaxWaitSeconds = 60
/** How often a waiting read looks again when no change signal came. */
const PollMillis = 1000

export const submitTool = defineTool({
  name: "submit",
  description:
    "Queue a task. Returns a receipt {task_id, payload_sha256, created_at}: queued, not done. The same client_request_id and payload always return the same receipt; a different payload under the same id is a ConflictError.",
  input: Schema.Struct({
    client_request_id: ClientRequestId.annotations({
      description: "Your idempotency key (1-200 printable characters)"
    }),
    payload: JsonObject.annotations({ description: "The task, a JSON object (at most 1 MiB)" })
  }),
  output: Receipt,
  tier: "write",
  idempotent: true,
  handler: (input) =>
    Effect.flatMap(TaskStore, (store) =>
      store.submit({ clientRequestId: input.client_request_id, payload: input.payload })
    )
})

export const readTool = defineTool({
  name: "read",
  description: `Read a task's state, result, error and attempts by its receipt. Repeatable, no side effects. With wait_seconds (0-${MaxWaitSeconds}) it waits until the task is finished or the time is up, sending progress notifications when you pass a progress token.`,
  input: Schema.Struct({
    ...ReceiptArgs,
    wait_seconds: Schema.optional(
      Schema.Number.pipe(Schema.between(0, MaxWaitSeconds)).annotations({
        description: `Wait up to this many seconds for the task to finish (0-${MaxWaitSeconds})`
      })
    )
  }),
  output: TaskView,
  tier: "read_only",
  handler: (input, context) =>
    Effect.scoped(
      Effect.gen(function* () {
        const store = yield* TaskStore
        const waitMillis = (input.wait_seconds ?? 0) * 1000
        // A change of this task (a file watch, a NOTIFY) wakes the wait at once; the poll is
        // the fallback for a signal that never comes.
        const changed = yield* Queue.sliding<void>(1)
        if (waitMillis > 0)
          yield* store.changes.pipe(
            Stream.filter((taskId) => taskId === input.task_id),
            Stream.runForEach(() => Queue.offer(changed, undefined)),
            Effect.forkScoped
          )
        const started = yield* Clock.currentTimeMillis
        for (;;) {
          const view = yield* store.read(input.task_id, input.payload_sha256)
          const elapsed = (yield* Clock.currentTimeMillis) - started
          if (isTerminal(view.state) || elapsed >= waitMillis) return view
          // Progress must grow with every notification: seconds waited, unrounded.
          yield* context.progress(elapsed / 1000, waitMillis / 1000, `task is ${view.state}`)
          yield* Queue.take(changed).pipe(
            Effect.timeout(Duration.millis(Math.min(PollMillis, waitMillis - elapsed))),
            Effect.ignore
          )
        }
      })
    )
})

export const cancelTool = defineTool({
  name: "cancel",
  description:
    "Cancel a task by its receipt. Returns {cancelled, cancel_requested, state}: a queued task is cancelled at once (cancelled: true, again true if it already was); a running task gets cancel_requested: true and its worker stops it within a few seconds (it then reads as cancelled); a finished task is left as it is.",
  input: Schema.Struct(ReceiptArgs),
  output: CancelOutcome,
  tier: "write",
  idempotent: true,
  handler: (input) => Effect.flatMap(TaskStore, (store) => store.cancel(input.task_id, input.payload_sha256))
})

export const listTool = defineTool({
  name: "list",
  description:
    "List tasks newest first, optionally by state, a page at a time (pass next_cursor back as cursor).",
  input: Schema.Struct({
    state: Schema.optional(TaskState),
    limit: Schema.optional(Schema.Int.pipe(Schema.between(1, MaxListLimit))),
    cursor: Schema.optional(Schema.String)
  }),
  output: Schema.Struct({ tasks: Schema.Array(TaskSummary), next_cursor: Schema.NullOr(Schema.String) }),
  tier: "read_only",
  handler: (input) => Effect.flatMap(TaskStore, (store) => store.list(input))
})

export const taskTools = [submitTool, readTool, cancelTool, listTool]
