import { Version } from "../../version.js"
import type { ServerSpec } from "../server.js"
import type { TaskStore } from "../../services/TaskStore.js"
import { taskTools } from "./tools.js"

/** What every client is told at initialization (kept under 512 characters; a test checks). */
export const TasksInstructions =
  "RelayKeep queues tasks for a worker that the user runs; this server never runs them. A receipt from submit means queued, not done: keep it, and read(task_id, payload_sha256) as often as you like, with wait_seconds to wait for the result. If you lose a receipt, resubmit the same client_request_id and payload to get it back. Never resubmit under a new id while a task may be running: it would run twice."

export const tasksServer: ServerSpec<TaskStore> = {
  name: "relaykeep-tasks",
  version: Version,
  instructions: TasksInstructions,
  tools: taskTools
}
