/** Health: the store, counts by state, live workers, the last hour and day, provider diagnostics. */
import { describe, get } from "../api.js"
import { hourlyChart } from "../chart.js"
import { badge, h, mount, readable } from "../dom.js"
import { age, shortId, when } from "../format.js"
import { field, isRecord, list, number, States, text } from "../json.js"
import { debounce, onTaskChange } from "../live.js"
import { problem } from "./view.js"
import type { View } from "./view.js"

/** How often the workers panel is read again while it is shown. */
const HeartbeatRefreshMillis = 5_000

const storeText = (store: unknown): string =>
  text(store, "kind") === "postgres"
    ? `PostgreSQL, schema ${text(store, "schema") ?? "?"}, queue ${text(store, "queue") ?? "?"}`
    : `files in ${text(store, "root") ?? "?"}`

const counts = (value: unknown): HTMLElement =>
  h(
    "ul",
    { class: "counts" },
    ...States.map((state) => h("li", {}, badge(state), " ", h("strong", {}, number(value, state) ?? 0)))
  )

/** What a worker's state means, in words: the badge's colour only decorates it. */
const workerLine = (worker: unknown): ReadonlyArray<Node | string | false> => {
  const state = text(worker, "state")
  const heartbeat = text(worker, "last_heartbeat_at")
  if (state === "unannounced")
    return ["seen through the leases it holds: a one-shot pass, or a worker that does not announce itself"]
  if (state === "late") return [`no heartbeat since ${when(heartbeat)} (${age(heartbeat)}): stopped or stuck`]
  return [
    `heartbeat ${age(heartbeat)}`,
    ` · up ${age(text(worker, "started_at")).replace(/ ago$/, "")}`,
    ` · RelayKeep ${text(worker, "version") ?? "?"}`
  ]
}

const workers = (entries: ReadonlyArray<unknown>): HTMLElement =>
  entries.length === 0
    ? h("p", { class: "muted" }, "No worker is watching this queue, and none holds a task.")
    : h(
        "ul",
        { class: "workers" },
        ...entries.map((worker) => {
          const running = list(worker, "running").filter((id): id is string => typeof id === "string")
          const concurrency = number(worker, "concurrency")
          const expires = text(worker, "lease_expires_at")
          return h(
            "li",
            { class: "worker" },
            h(
              "div",
              {},
              h("strong", {}, text(worker, "worker_id") ?? "?"),
              " ",
              badge(text(worker, "state") ?? "?"),
              " ",
              h(
                "span",
                { class: "muted" },
                `${text(worker, "hostname") ?? "?"} · pid ${number(worker, "pid") ?? "?"}`
              )
            ),
            h("div", { class: "muted" }, ...workerLine(worker)),
            h(
              "div",
              {},
              running.length > 0
                ? `running ${running.length}${concurrency === null ? "" : ` of ${concurrency}`}: `
                : text(worker, "state") === "late"
                  ? "holds no task"
                  : `idle${concurrency === null ? "" : ` (up to ${concurrency} at once)`}`,
              ...running.flatMap((id) => [h("a", { href: `#/task/${id}` }, shortId(id)), " "]),
              expires !== null &&
                h("span", { class: "muted" }, `(leases until ${new Date(expires).toLocaleTimeString()})`)
            )
          )
        })
      )

const windowCounts = (label: string, value: unknown): HTMLElement =>
  h(
    "div",
    { class: "window" },
    h("h3", {}, label),
    h(
      "ul",
      { class: "counts" },
      ...["submitted", "complete", "failed", "cancelled"].map((name) =>
        h("li", {}, `${name} `, h("strong", {}, number(value, name) ?? 0))
      )
    )
  )

export const healthView: View = (root) => {
  const healthArea = h("section", { "aria-labelledby": "health-heading" })
  // Its own section, there from the start: the workers refresh on their own, whatever health did.
  const workersArea = h("div", {})
  const workersSection = h(
    "section",
    { "aria-labelledby": "workers-heading" },
    h("h2", { id: "workers-heading" }, "Workers"),
    h(
      "p",
      { class: "help" },
      "Watching workers announce themselves every few seconds; one whose heartbeat is overdue shows as late."
    ),
    workersArea
  )
  const statsArea = h("section", { "aria-labelledby": "stats-heading" })
  const doctorArea = h("section", { "aria-labelledby": "doctor-heading" })
  mount(root, h("h1", { tabindex: "-1" }, "Health"), healthArea, workersSection, statsArea, doctorArea)

  /**
   * Each answer about the workers carries the number of its request; one that arrives after a
   * later request was made is out of date and dropped.
   */
  let workersAsked = 0
  const showWorkers = (body: unknown): void => {
    const unreadable = text(body, "registry_error")
    mount(
      workersArea,
      ...(unreadable === null
        ? []
        : [
            problem(
              `The worker registry could not be read (${unreadable}): only workers holding a task show.`
            )
          ]),
      workers(list(body, "workers"))
    )
  }

  const loadHealth = async (): Promise<void> => {
    const asked = ++workersAsked
    const outcome = await get("/api/health")
    if (!outcome.ok) return mount(healthArea, problem(describe(outcome)))
    const body = outcome.body
    if (asked === workersAsked) showWorkers(body)
    mount(
      healthArea,
      h("h2", { id: "health-heading" }, "Queue"),
      h(
        "p",
        {},
        `Status ${text(body, "status") ?? "?"} · RelayKeep ${text(body, "version") ?? "?"} · ${storeText(field(body, "store"))}`
      ),
      counts(field(body, "counts"))
    )
  }

  // Heartbeats change no task, so no event says so: the workers are read again on a timer, and
  // alone (health counts every task), while the page is in view.
  const loadWorkers = async (): Promise<void> => {
    if (document.hidden) return
    const asked = ++workersAsked
    const outcome = await get("/api/workers")
    if (asked !== workersAsked) return
    if (!outcome.ok) return mount(workersArea, problem(describe(outcome)))
    showWorkers(outcome.body)
  }

  const loadStats = async (): Promise<void> => {
    const outcome = await get("/api/stats")
    if (!outcome.ok) return mount(statsArea, problem(describe(outcome)))
    const body = outcome.body
    mount(
      statsArea,
      h("h2", { id: "stats-heading" }, "Activity"),
      h(
        "div",
        { class: "windows" },
        windowCounts("Last hour", field(body, "hour")),
        windowCounts("Last day", field(body, "day"))
      ),
      hourlyChart(list(body, "buckets"))
    )
  }

  const loadDoctor = async (): Promise<void> => {
    const outcome = await get("/api/doctor")
    if (!outcome.ok) return mount(doctorArea, problem(describe(outcome)))
    const rows = Array.isArray(outcome.body) ? outcome.body : list(outcome.body, "providers")
    mount(
      doctorArea,
      h("h2", { id: "doctor-heading" }, "Providers"),
      rows.length === 0
        ? readable(outcome.body)
        : h(
            "ul",
            { class: "providers" },
            ...rows.map((row) =>
              h(
                "li",
                {},
                h("strong", {}, text(row, "provider") ?? "?"),
                " ",
                badge(
                  field(row, "ok") === true ? "ok" : field(row, "configured") === false ? "off" : "problem"
                ),
                " ",
                text(row, "problem") ?? text(row, "version") ?? "",
                isRecord(row) && h("details", {}, h("summary", {}, "Details"), readable(row))
              )
            )
          )
    )
  }

  const refresh = debounce(() => {
    void loadHealth()
    void loadStats()
  }, 1000)
  const stopLive = onTaskChange(refresh)
  const timer = window.setInterval(() => void loadWorkers(), HeartbeatRefreshMillis)
  const onVisible = (): void => void loadWorkers()
  document.addEventListener("visibilitychange", onVisible)
  void loadHealth()
  void loadStats()
  void loadDoctor()
  return () => {
    window.clearInterval(timer)
    document.removeEventListener("visibilitychange", onVisible)
    stopLive()
  }
}
