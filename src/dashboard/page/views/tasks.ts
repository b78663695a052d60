/** The task table: filters, newest first, cursor paging, rows updated live. */
import { describe, get, taskPath } from "../api.js"
import { badge, button, h, mount } from "../dom.js"
import { age, duration, shortId } from "../format.js"
import { field, States, summaries, text, toSummary } from "../json.js"
import type { TaskSummary } from "../json.js"
import { debounce, onTaskChange } from "../live.js"
import { GroupProvider } from "../broadcast.js"
import { problem } from "./view.js"
import type { View } from "./view.js"

const Providers = ["claude", "codex", "ollama", "openai", GroupProvider]

const row = (task: TaskSummary): HTMLTableRowElement =>
  h(
    "tr",
    { "data-task-id": task.task_id, "data-state": task.state },
    h("td", {}, badge(task.state)),
    h(
      "td",
      { class: "request" },
      h(
        "a",
        { href: `#/task/${task.task_id}`, title: task.task_id },
        task.client_request_id || shortId(task.task_id)
      )
    ),
    h(
      "td",
      {},
      task.provider === GroupProvider
        ? h(
            "a",
            { href: `#/group/${task.task_id}`, title: "A broadcast group: open its members side by side" },
            GroupProvider
          )
        : (task.provider ??
            h(
              "span",
              { class: "muted", title: "The payload names no provider: the built-in fake-echo runs it" },
              "fake-echo"
            ))
    ),
    h("td", { class: "age", title: task.created_at }, age(task.created_at)),
    h("td", { class: "duration narrow-hide" }, duration(task.started_at, task.finished_at)),
    h("td", { class: "narrow-hide num" }, task.attempt)
  )

export const tasksView: View = (root) => {
  const state = h("select", { name: "state", id: "filter-state" }, h("option", { value: "" }, "any"))
  for (const name of States) state.appendChild(h("option", { value: name }, name))
  const provider = h("input", {
    name: "provider",
    id: "filter-provider",
    list: "providers",
    autocomplete: "off"
  })
  const providers = h(
    "datalist",
    { id: "providers" },
    ...Providers.map((name) => h("option", { value: name }))
  )
  const search = h("input", { name: "q", id: "filter-q", type: "search", placeholder: "request id" })
  const filters = h(
    "form",
    { class: "filters", role: "search" },
    h("label", { for: "filter-state" }, "State ", state),
    h("label", { for: "filter-provider" }, "Provider ", provider, providers),
    h("label", { for: "filter-q" }, "Search ", search),
    h("button", { type: "submit" }, "Filter")
  )
  const body = h("tbody")
  const table = h(
    "table",
    { class: "tasks" },
    h("caption", { class: "visually-hidden" }, "Tasks, newest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ...["State", "Request id", "Provider", "Age"].map((label) => h("th", { scope: "col" }, label)),
        h("th", { scope: "col", class: "narrow-hide" }, "Duration"),
        h("th", { scope: "col", class: "narrow-hide" }, "Attempt")
      )
    ),
    body
  )
  const status = h("p", { class: "status", role: "status" })
  const paging = h("div", { class: "paging" })
  mount(
    root,
    h("h1", { tabindex: "-1" }, "Tasks"),
    filters,
    status,
    h("div", { class: "table-wrap" }, table),
    paging
  )

  // The page shown: `cursor` is null for the newest one, which new tasks appear on; `newer`
  // holds the cursors of the pages before it, for the way back.
  let cursor: string | null = null
  const newer: Array<string | null> = []
  let rows = new Map<string, TaskSummary>()
  // Only the answer to the latest request is drawn, whatever order the answers come in.
  let latest = 0

  const first = (): void => {
    cursor = null
    newer.length = 0
    void load()
  }

  const load = async (): Promise<void> => {
    const request = ++latest
    const outcome = await get("/api/tasks", {
      state: state.value,
      provider: provider.value.trim(),
      q: search.value.trim(),
      cursor: cursor ?? "",
      limit: "50"
    })
    if (request !== latest) return
    if (!outcome.ok) {
      mount(status, problem(describe(outcome)))
      return
    }
    const tasks = summaries(outcome.body, "tasks")
    rows = new Map(tasks.map((task) => [task.task_id, task]))
    mount(body, ...tasks.map(row))
    status.textContent = tasks.length === 0 ? "No tasks match." : `${tasks.length} tasks shown.`
    const next = text(outcome.body, "next_cursor")
    mount(
      paging,
      cursor !== null && button("Newest", first),
      cursor !== null &&
        button("Newer", () => {
          cursor = newer.pop() ?? null
          void load()
        }),
      next !== null &&
        button("Older", () => {
          newer.push(cursor)
          cursor = next
          void load()
        })
    )
  }

  const refreshPage = debounce(() => void load(), 300)

  /** Re-read one changed task and replace its row; keep the provider the list gave. */
  const refreshRow = async (taskId: string): Promise<void> => {
    const outcome = await get(taskPath(taskId))
    const known = rows.get(taskId)
    const summary = outcome.ok ? toSummary(field(outcome.body, "task"), known?.provider ?? null) : null
    const current = body.querySelector(`tr[data-task-id="${CSS.escape(taskId)}"]`)
    if (summary === null || known === undefined || current === null) return refreshPage()
    if (state.value !== "" && summary.state !== state.value) return refreshPage()
    rows.set(taskId, summary)
    current.replaceWith(row(summary))
  }

  filters.addEventListener("submit", (event) => {
    event.preventDefault()
    first()
  })
  state.addEventListener("change", first)

  const stopLive = onTaskChange((change) => {
    if (change === "reconnected") return refreshPage()
    if (rows.has(change.task_id)) void refreshRow(change.task_id)
    else if (cursor === null) refreshPage()
  })
  // Ages and running durations move on without any change to the tasks; only their text is
  // rewritten, so the keyboard focus stays where it is.
  const tick = (): void => {
    for (const element of body.rows) {
      const task = rows.get(element.dataset["taskId"] ?? "")
      if (task === undefined) continue
      const [ageCell, durationCell] = [element.querySelector(".age"), element.querySelector(".duration")]
      if (ageCell !== null) ageCell.textContent = age(task.created_at)
      if (durationCell !== null) durationCell.textContent = duration(task.started_at, task.finished_at)
    }
  }
  const ticker = window.setInterval(tick, 10_000)
  void load()
  return () => {
    stopLive()
    window.clearInterval(ticker)
  }
}
