/** The tools of `relaykeep-tasks`: the queue's submit, read (with waiting), cancel and list. */
import { Clock, Duration, Effect, Queue, Schema, Stream } from "effect"
import { Integer, JsonNumber, JsonObject } from "../../domain/fields.js"
import { ClientRequestId, MaxKeyChars, PayloadSha256, TaskId } from "../../domain/ids.js"
import { ListCursor } from "../../domain/submission.js"
import {
  CancelOutcome,
  isTerminal,
  Receipt,
  TaskState,
  TaskStates,
  TaskSummary,
  TaskView
} from "../../domain/Task.js"
import { TaskStore } from "../../services/TaskStore.js"
import { DefaultListLimit, MaxListLimit } from "../../store/shared.js"
import { defineTool } from "../Tool.js"

const ReceiptArgs = {
  task_id: TaskId.annotations({
    description: "The task_id of the receipt submit returned: 64 lowercase hex characters"
  }),
  payload_sha256: PayloadSha256.annotations({
    description: "The payload_sha256 of the same receipt: 64 lowercase hex characters"
  })
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
      description: `Your idempotency key for this task: 1-${MaxKeyChars} printable characters. Submitting again under the same key with the same payload returns the same receipt.`
    }),
    payload: JsonObject.annotations({
      description:
        'The task: a JSON object, at most 1 MiB as canonical JSON unless the queue is set otherwise. {"provider", "model", "prompt"} runs that provider; an object naming no provider is handed back as the result.'
    })
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
      JsonNumber({ minimum: 0, maximum: MaxWaitSeconds }).annotations({
        description: `How long to wait for the task to finish, in seconds from 0 to ${MaxWaitSeconds} (fractions allowed). Without it, or with 0, the task is read at once.`
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
    "Cancel a task by its receipt. Returns {cancelled, cancel_requested, state}: a queued task is cancelled at once (cancelled: true, again true if it already was); a running task gets cancel_requested: true and its worker stops it within a few seconds, and it then reads as cancelled, unless its provider had already returned a result before the worker noticed: that result stands and the task reads complete (with cancel_requested_at set); a finished task is left as it is.",
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
    state: Schema.optional(
      TaskState.annotations({
        description: `Only tasks in this state: one of ${TaskStates.join(", ")}. Without it, tasks in every state.`
      })
    ),
    limit: Schema.optional(
      Integer({ minimum: 1, maximum: MaxListLimit }).annotations({
        description: `How many tasks a page holds at most: an integer from 1 to ${MaxListLimit}.`,
        default: DefaultListLimit
      })
    ),
    cursor: Schema.optional(
      ListCursor.annotations({
        description:
          "The next_cursor of the previous page, to read the page after it. Without it, the first page."
      })
    )
  }),
  output: Schema.Struct({
    tasks: Schema.Array(TaskSummary).annotations({ description: "This page's tasks, newest first" }),
    next_cursor: Schema.NullOr(Schema.String).annotations({
      description: "Pass it back as cursor for the next page; null on the last page"
    })
  }),
  tier: "read_only",
  handler: (input) => Effect.flatMap(TaskStore, (store) => store.list(input))
})

export const taskTools = [submitTool, readTool, cancelTool, listTool]
