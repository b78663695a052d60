import { Version } from "../../version.js"
import type { ServerSpec } from "../server.js"
import type { TaskStore } from "../../services/TaskStore.js"
import { taskTools } from "./tools.js"

/** What every client is told at initialization (kept under 512 characters; a test checks). */
export const TasksInstructions =
  "RelayKeep queues tasks for a worker the user runs; this server never runs them. submit returns a receipt: queued, not done. Keep it; read(task_id, payload_sha256, wait_seconds) as often as you like. If your client has MCP tasks, prefer calling submit as a task: its taskId is the receipt, and tasks/get and tasks/result work from any later session. Lost a receipt? Resubmit the same client_request_id and payload. Never resubmit under a new id while a task may run: it would run twice."

export const tasksServer: ServerSpec<TaskStore> = {
  name: "relaykeep-tasks",
  version: Version,
  instructions: TasksInstructions,
  tools: taskTools
}
