/**
 * A broadcast group: one card per member, side by side in the order of its targets, each with
 * its provider and model, state, result or error, attempts and times, and a link to its task.
 * Live: a change of a member (or of the group record, while it is unsettled) reads it again.
 */
import { describe, get, groupPath } from "../api.js"
import { badge, h, mount, readable } from "../dom.js"
import { duration, shortId, when, whenSet } from "../format.js"
import { field, list, number, States, text } from "../json.js"
import { debounce, onTaskChange } from "../live.js"
import { errorBlock, facts } from "./detail.js"
import { problem } from "./view.js"
import type { View } from "./view.js"

const memberCard = (member: unknown, place: number): HTMLElement => {
  const taskId = text(member, "task_id") ?? ""
  const state = text(member, "state") ?? "unknown"
  const result = field(member, "result")
  const heading = `member-${place}`
  return h(
    "article",
    { class: "member", "data-task-id": taskId, "aria-labelledby": heading },
    h("h2", { id: heading }, `${text(member, "provider") ?? "?"} · ${text(member, "model") ?? "?"}`),
    h(
      "p",
      {},
      badge(state),
      " ",
      h("a", { href: `#/task/${taskId}`, title: taskId }, `Task ${shortId(taskId)}`)
    ),
    facts([
      ["Attempts", number(member, "attempt")],
      ["Started", whenSet(text(member, "started_at"))],
      ["Finished", whenSet(text(member, "finished_at"))],
      ["Duration", duration(text(member, "started_at"), text(member, "finished_at"))],
      ["Cancel requested", whenSet(text(member, "cancel_requested_at"))],
      ["Not before", whenSet(text(member, "not_before"))]
    ]),
    h("h3", {}, "Result"),
    result === null || result === undefined
      ? h(
          "p",
          { class: "muted" },
          state === "queued" || state === "running" ? "No result yet." : "No result."
        )
      : readable(result),
    errorBlock(field(member, "error"))
  )
}

/** "1 complete, 1 running": the states some member is in, in the order of the task states. */
const countsText = (counts: unknown): string =>
  States.flatMap((state) => {
    const count = number(counts, state) ?? 0
    return count === 0 ? [] : [`${count} ${state}`]
  }).join(", ")

export const groupView: View = (root, groupId) => {
  const heading = h("h1", { tabindex: "-1" }, "Group")
  const content = h("div", { class: "group" })
  mount(root, h("p", {}, h("a", { href: "#/" }, "← All tasks")), heading, content)
  // The members' ids once known, and the group record's own: the changes that concern the page.
  let watched = new Set([groupId])
  // Only the answer to the latest request is drawn, whatever order the answers come in.
  let latest = 0

  const load = async (): Promise<void> => {
    const request = ++latest
    const outcome = await get(groupPath(groupId))
    if (request !== latest) return
    const group = outcome.ok ? field(outcome.body, "group") : null
    if (!outcome.ok || group === null) return mount(content, problem(describe(outcome)))
    const members = list(group, "members")
    watched = new Set([groupId, ...members.flatMap((member) => text(member, "task_id") ?? [])])
    mount(heading, "Group ", badge(text(group, "state") ?? "unknown"))
    mount(
      content,
      facts([
        ["Request id", text(group, "client_request_id")],
        ["Group id", text(group, "group_id")],
        ["Payload SHA-256", text(group, "payload_sha256")],
        ["Created", when(text(group, "created_at"))],
        ["Members", countsText(field(group, "counts"))]
      ]),
      h("p", {}, h("a", { href: `#/task/${groupId}` }, "The group's own record")),
      h("div", { class: "members" }, ...members.map(memberCard))
    )
  }

  // Members often change together (a worker claims several at once): one read for a burst.
  const reload = debounce(() => void load(), 200)
  const stopLive = onTaskChange((change) => {
    if (change === "reconnected" || watched.has(change.task_id)) reload()
  })
  void load()
  return stopLive
}
