/**
 * The tools of `relaykeep-tasks`: the queue's submit, read (with waiting), cancel and list, and
 * broadcast with read_group for one prompt to several providers.
 */
import { Clock, Effect, Schema } from "effect"
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
import { checkRequestId, checkSubmittable } from "../../domain/mcpTask.js"
import { GroupReceipt, GroupView, MaxTargets, Targets } from "../../domain/broadcast.js"
import { readGroup } from "../../broadcast/read.js"
import { submitBroadcast } from "../../broadcast/submit.js"
import { TaskStore } from "../../services/TaskStore.js"
import { DefaultListLimit, MaxListLimit } from "../../store/shared.js"
import { defineTool } from "../Tool.js"
import { changeSignal, PollMillis } from "../taskWait.js"

const ReceiptArgs = {
  task_id: TaskId.annotations({
    description: "The task_id of the receipt submit returned: 64 lowercase hex characters"
  }),
  payload_sha256: PayloadSha256.annotations({
    description: "The payload_sha256 of the same receipt: 64 lowercase hex characters"
  })
}

export const MaxWaitSeconds = 60

const { fields: view } = TaskView

/**
 * submit's answer: the receipt. Called as an MCP task, `tasks/result` answers with the finished
 * task as `read` shows it, which holds the receipt's fields and the rest of these.
 */
const SubmitAnswer = Schema.Struct({
  ...Receipt.fields,
  client_request_id: Schema.optional(view.client_request_id),
  state: Schema.optional(view.state),
  result: Schema.optional(view.result),
  error: Schema.optional(view.error),
  updated_at: Schema.optional(view.updated_at),
  started_at: Schema.optional(view.started_at),
  finished_at: Schema.optional(view.finished_at),
  attempt: Schema.optional(view.attempt),
  attempts: Schema.optional(view.attempts),
  max_attempts: Schema.optional(view.max_attempts),
  not_before: Schema.optional(view.not_before),
  cancel_requested_at: Schema.optional(view.cancel_requested_at)
}).annotations({
  description:
    "The receipt; called as an MCP task, tasks/result answers with the finished task as read shows it (these fields with its state, result and error)"
})

export const submitTool = defineTool({
  name: "submit",
  description:
    "Queue a task. Returns a receipt {task_id, payload_sha256, created_at}: queued, not done. The same client_request_id and payload always return the same receipt; a different payload under the same id is a ConflictError. Clients with MCP tasks may call it as a task: tasks/result then waits for the finished task.",
  input: Schema.Struct({
    client_request_id: ClientRequestId.annotations({
      description: `Your idempotency key for this task: 1-${MaxKeyChars} printable characters. Submitting again under the same key with the same payload returns the same receipt.`
    }),
    payload: JsonObject.annotations({
      description:
        'The task: a JSON object, at most 1 MiB as canonical JSON unless the queue is set otherwise. {"provider", "model", "prompt"} runs that provider; an object naming no provider is handed back as the result.'
    })
  }),
  output: SubmitAnswer,
  tier: "write",
  idempotent: true,
  taskSupport: "optional",
  queuedTask: true,
  handler: (input, context) =>
    Effect.zipRight(
      Effect.zipRight(checkRequestId(input.client_request_id), checkSubmittable(input.payload)),
      Effect.flatMap(TaskStore, (store) =>
        store.submit({
          clientRequestId: input.client_request_id,
          payload: input.payload,
          ...(context.task === undefined ? {} : { ttlMillis: context.task.ttl })
        })
      )
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
        const nextChange = waitMillis > 0 ? yield* changeSignal(store, input.task_id) : () => Effect.void
        const started = yield* Clock.currentTimeMillis
        for (;;) {
          const view = yield* store.read(input.task_id, input.payload_sha256)
          const elapsed = (yield* Clock.currentTimeMillis) - started
          if (isTerminal(view.state) || elapsed >= waitMillis) return view
          // Progress must grow with every notification: seconds waited, unrounded.
          yield* context.progress(elapsed / 1000, waitMillis / 1000, `task is ${view.state}`)
          yield* nextChange(Math.min(PollMillis, waitMillis - elapsed))
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

export const broadcastTool = defineTool({
  name: "broadcast",
  description: `Queue one prompt to several providers (a second opinion): one task per target under one group. Returns a group receipt {group_id, payload_sha256, created_at, members: [{provider, model, task_id, payload_sha256, created_at}]} once every member is queued. The same client_request_id, targets and payload always return the same group receipt; different ones under the same id are a ConflictError. Read it with read_group.`,
  input: Schema.Struct({
    client_request_id: ClientRequestId.annotations({
      description: `Your idempotency key for the whole group: 1-${MaxKeyChars} printable characters.`
    }),
    targets: Targets.annotations({
      description: `1-${MaxTargets} distinct {provider, model}, in the order the members are queued and shown.`
    }),
    payload: JsonObject.annotations({
      description:
        'What every member shares: {"prompt"} and, for claude and codex, an optional "work_dir". Never provider or model: each target names its own.'
    })
  }),
  output: GroupReceipt,
  tier: "write",
  idempotent: true,
  handler: (input) =>
    submitBroadcast({
      clientRequestId: input.client_request_id,
      targets: input.targets,
      payload: input.payload
    })
})

export const readGroupTool = defineTool({
  name: "read_group",
  description: `Read a broadcast group by its receipt: every member's state, result and error side by side, and the group's state (running while any member runs, complete when all completed, failed when all finished and any failed or was cancelled). With wait_seconds (0-${MaxWaitSeconds}) it waits until every member is finished or the time is up.`,
  input: Schema.Struct({
    group_id: GroupReceipt.fields.group_id,
    payload_sha256: GroupReceipt.fields.payload_sha256,
    wait_seconds: Schema.optional(
      JsonNumber({ minimum: 0, maximum: MaxWaitSeconds }).annotations({
        description: `How long to wait for every member to finish, in seconds from 0 to ${MaxWaitSeconds} (fractions allowed). Without it, or with 0, the group is read at once.`
      })
    )
  }),
  output: GroupView,
  tier: "read_only",
  handler: (input, context) => {
    const waitMillis = (input.wait_seconds ?? 0) * 1000
    return readGroup(input.group_id, input.payload_sha256, {
      waitMillis,
      // Progress must grow with every notification: seconds waited, unrounded.
      onProgress: (waited, view) =>
        context.progress(
          waited / 1000,
          waitMillis / 1000,
          `${view.members.length - view.counts.queued - view.counts.running} of ${view.members.length} members finished`
        )
    })
  }
})

export const taskTools = [submitTool, readTool, cancelTool, listTool, broadcastTool, readGroupTool]
