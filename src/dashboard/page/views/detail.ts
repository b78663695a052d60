/**
 * One task: its payload, result, error and attempt timeline, with a guarded cancel button; a
 * broadcast's group record or member links to the group's page.
 */
import { describe, get, post, taskPath } from "../api.js"
import { badge, button, h, mount, readable } from "../dom.js"
import { duration, when, whenSet } from "../format.js"
import { field, isRecord, list, number, text } from "../json.js"
import { onTaskChange } from "../live.js"
import { groupOfTask } from "../broadcast.js"
import { problem } from "./view.js"
import type { View } from "./view.js"

/** A definition list of the fields that are present. */
export const facts = (entries: ReadonlyArray<readonly [string, string | number | null]>): HTMLDListElement =>
  h(
    "dl",
    { class: "facts" },
    ...entries.flatMap(([term, value]) =>
      value === null || value === "" ? [] : [h("dt", {}, term), h("dd", {}, String(value))]
    )
  )

export const errorBlock = (error: unknown): HTMLElement | null => {
  if (!isRecord(error)) return null
  const stderr = text(error, "stderr_tail")
  const stdout = text(error, "stdout_error")
  return h(
    "div",
    { class: "error" },
    h("p", {}, h("strong", {}, text(error, "tag") ?? "Error"), ": ", text(error, "message") ?? ""),
    stderr !== null && h("details", {}, h("summary", {}, "stderr (end)"), readable(stderr)),
    stdout !== null && h("details", {}, h("summary", {}, "stdout error field"), readable(stdout))
  )
}

const receiptBlock = (receipt: unknown): HTMLElement | null => {
  if (!isRecord(receipt)) return null
  const usage = field(receipt, "usage")
  const cost = number(receipt, "cost_usd")
  return h(
    "div",
    { class: "receipt" },
    facts([
      ["Provider", text(receipt, "provider")],
      ["Requested model", text(receipt, "requested_model")],
      ["Model", text(receipt, "model")],
      ["Duration", number(receipt, "duration_ms") === null ? null : `${number(receipt, "duration_ms")} ms`],
      ["Exit code", number(receipt, "exit_code")],
      ["HTTP status", number(receipt, "http_status")],
      ["Cost", cost === null ? null : `$${cost.toFixed(4)}`],
      ["Output", number(receipt, "output_bytes") === null ? null : `${number(receipt, "output_bytes")} bytes`]
    ]),
    usage !== null && usage !== undefined && h("details", {}, h("summary", {}, "Usage"), readable(usage))
  )
}

/** The way from a group record, or from one of its members, to the group's page. */
const groupLink = (task: unknown): HTMLElement | null => {
  const group = groupOfTask(task)
  if (group === null) return null
  const href = `#/group/${group.groupId}`
  return group._tag === "group"
    ? h(
        "p",
        { class: "group-link" },
        "A broadcast group's record: ",
        h("a", { href }, "its members side by side")
      )
    : h(
        "p",
        { class: "group-link" },
        "A member of a broadcast: ",
        h("a", { href }, "its group, side by side")
      )
}

const attemptItem = (attempt: unknown): HTMLLIElement => {
  const outcome = text(attempt, "outcome") ?? "unknown"
  const late = field(attempt, "late")
  return h(
    "li",
    { class: "attempt" },
    h("p", {}, h("strong", {}, `Attempt ${number(attempt, "attempt") ?? "?"}`), " ", badge(outcome)),
    facts([
      ["Worker", text(attempt, "worker_id")],
      ["Host", text(attempt, "host")],
      ["PID", number(attempt, "pid")],
      ["Started", when(text(attempt, "started_at"))],
      ["Ended", whenSet(text(attempt, "ended_at"))],
      ["Duration", duration(text(attempt, "started_at"), text(attempt, "ended_at"))]
    ]),
    errorBlock(field(attempt, "error")),
    receiptBlock(field(attempt, "receipt")),
    isRecord(late) &&
      h("details", {}, h("summary", {}, `Reported late: ${text(late, "outcome") ?? "?"}`), readable(late))
  )
}

export const detailView: View = (root, taskId) => {
  const heading = h("h1", { tabindex: "-1" }, "Task")
  const content = h("div", { class: "detail" })
  const notice = h("p", { class: "notice", role: "status" })
  mount(root, h("p", {}, h("a", { href: "#/" }, "← All tasks")), heading, notice, content)
  // While the confirmation is open, live updates wait: redrawing would take it away.
  let confirming = false
  let pending = false
  const settle = (): void => {
    confirming = false
    if (pending) {
      pending = false
      void load()
    }
  }

  const cancelControls = (state: string): HTMLElement | null => {
    if (state !== "queued" && state !== "running") return null
    const area = h("div", { class: "cancel" })
    const ask = (): void => {
      confirming = true
      const confirm = button("Yes, cancel it", () => void cancel(), { class: "danger" })
      mount(
        area,
        h("p", { role: "alert" }, "Cancel this task? A running task is stopped by its worker."),
        confirm,
        " ",
        button("Keep it", () => {
          mount(area, start)
          start.focus()
          settle()
        })
      )
      confirm.focus()
    }
    const cancel = async (): Promise<void> => {
      mount(area, h("p", { role: "status" }, "Cancelling…"))
      const outcome = await post(`${taskPath(taskId)}/cancel`)
      confirming = false
      pending = false
      if (!outcome.ok) return mount(area, problem(describe(outcome)), start)
      const result = field(outcome.body, "outcome")
      notice.textContent =
        field(result, "cancelled") === true ? "Cancelled." : "Cancel requested: its worker stops it."
      void load()
    }
    const start = button("Cancel task…", ask, { class: "danger" })
    mount(area, start)
    return area
  }

  const load = async (): Promise<void> => {
    const outcome = await get(taskPath(taskId))
    const task = outcome.ok ? field(outcome.body, "task") : null
    if (!outcome.ok || !isRecord(task)) return mount(content, problem(describe(outcome)))
    const state = text(task, "state") ?? "unknown"
    const error = errorBlock(field(task, "error"))
    const attempts = list(task, "attempts")
    mount(heading, "Task ", badge(state))
    mount(
      content,
      facts([
        ["Request id", text(task, "client_request_id")],
        ["Task id", text(task, "task_id")],
        ["Payload SHA-256", text(task, "payload_sha256")],
        ["Created", when(text(task, "created_at"))],
        ["Started", whenSet(text(task, "started_at"))],
        ["Finished", whenSet(text(task, "finished_at"))],
        ["Duration", duration(text(task, "started_at"), text(task, "finished_at"))],
        ["Attempts", number(task, "attempt")],
        ["Cancel requested", whenSet(text(task, "cancel_requested_at"))],
        ["Not before", whenSet(text(task, "not_before"))]
      ]),
      groupLink(task),
      cancelControls(state),
      h("h2", {}, "Payload"),
      readable(field(task, "payload")),
      h("h2", {}, "Result"),
      field(task, "result") === null || field(task, "result") === undefined
        ? h("p", { class: "muted" }, "No result yet.")
        : readable(field(task, "result")),
      error !== null && h("h2", {}, "Error"),
      error,
      h("h2", {}, "Attempts"),
      attempts.length === 0
        ? h("p", { class: "muted" }, "Not started yet.")
        : h("ol", { class: "timeline" }, ...attempts.map(attemptItem))
    )
  }

  const stopLive = onTaskChange((change) => {
    if (change !== "reconnected" && change.task_id !== taskId) return
    if (confirming) pending = true
    else void load()
  })
  void load()
  return stopLive
}
