/** The audit log of MCP tool calls, newest first, with the filters `relaykeep audit` has. */
import { describe, get } from "../api.js"
import { badge, h, mount, readable } from "../dom.js"
import { when } from "../format.js"
import { field, list, number, text } from "../json.js"
import { problem } from "./view.js"
import type { View } from "./view.js"

const Outcomes = ["ok", "error", "timeout", "denied", "invalid"]

const entryRow = (entry: unknown): HTMLTableRowElement => {
  const error = field(entry, "error")
  const args = field(entry, "arguments")
  const cut = text(field(entry, "arguments_truncated"), "reason")
  return h(
    "tr",
    {},
    h("td", { title: text(entry, "time") ?? "" }, when(text(entry, "time"))),
    h(
      "td",
      {},
      text(entry, "tool") ?? "–",
      h("br"),
      h("span", { class: "muted" }, text(entry, "server") ?? "")
    ),
    h("td", {}, badge(text(entry, "status") ?? "unknown")),
    h("td", { class: "num" }, `${number(entry, "duration_ms") ?? "–"} ms`),
    h(
      "td",
      {},
      text(error, "tag") !== null && h("p", {}, `${text(error, "tag")}: ${text(error, "message") ?? ""}`),
      args !== undefined &&
        h(
          "details",
          {},
          h("summary", {}, cut === null ? "Arguments" : `Arguments (cut: ${cut})`),
          readable(args)
        )
    )
  )
}

export const auditView: View = (root) => {
  const tool = h("input", { id: "audit-tool", name: "tool", autocomplete: "off" })
  const outcome = h("select", { id: "audit-outcome", name: "outcome" }, h("option", { value: "" }, "any"))
  for (const name of Outcomes) outcome.appendChild(h("option", { value: name }, name))
  const since = h("input", { id: "audit-since", name: "since", placeholder: "1h, 7d or a date" })
  const filters = h(
    "form",
    { class: "filters", role: "search" },
    h("label", { for: "audit-tool" }, "Tool ", tool),
    h("label", { for: "audit-outcome" }, "Outcome ", outcome),
    h("label", { for: "audit-since" }, "Since ", since),
    h("button", { type: "submit" }, "Filter")
  )
  const body = h("tbody")
  const status = h("div", { class: "status", role: "status" })
  mount(
    root,
    h("h1", { tabindex: "-1" }, "Audit log"),
    h("p", { class: "muted" }, "Every MCP tool call, with its arguments redacted."),
    filters,
    status,
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        {},
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...["Time", "Tool", "Outcome", "Duration", "Details"].map((label) =>
              h("th", { scope: "col" }, label)
            )
          )
        ),
        body
      )
    )
  )

  const load = async (): Promise<void> => {
    const answer = await get("/api/audit", {
      tool: tool.value.trim(),
      outcome: outcome.value,
      since: since.value.trim(),
      limit: "100"
    })
    if (!answer.ok) return mount(status, problem(describe(answer)))
    const entries = list(answer.body, "entries")
    mount(body, ...entries.map(entryRow))
    status.textContent = entries.length === 0 ? "No entries match." : `${entries.length} entries shown.`
  }
  filters.addEventListener("submit", (event) => {
    event.preventDefault()
    void load()
  })
  void load()
  return () => undefined
}
