/**
 * How the page knows a broadcast (src/domain/broadcast.ts): a group record by its payload's
 * reserved provider `broadcast`, a member by its request id `broadcast:<group id>:<place>`.
 * Pure, without the DOM, so Node tests import it.
 */
import { field, text } from "./json.js"

/** The reserved provider of a group record (src/domain/mcpTask.ts BroadcastProvider). */
export const GroupProvider = "broadcast"

const MemberRequestId = /^broadcast:([0-9a-f]{64}):[1-9][0-9]*$/

/** The group a member's request id names, or null for any other request id. */
export const groupOfRequestId = (requestId: string): string | null =>
  MemberRequestId.exec(requestId)?.[1] ?? null

/**
 * The group page a task's record leads to: its own when it is a group record, its group's when
 * it is a member; null for any other task.
 */
export const groupOfTask = (
  task: unknown
): { readonly _tag: "group" | "member"; readonly groupId: string } | null => {
  const taskId = text(task, "task_id")
  if (taskId !== null && text(field(task, "payload"), "provider") === GroupProvider)
    return { _tag: "group", groupId: taskId }
  const groupId = groupOfRequestId(text(task, "client_request_id") ?? "")
  return groupId === null ? null : { _tag: "member", groupId }
}
