/**
 * The dashboard page: a hash router over five views. Plain DOM code bundled by esbuild; see
 * docs/dashboard.md for why there is no framework.
 */
import { auditView } from "./views/audit.js"
import { detailView } from "./views/detail.js"
import { healthView } from "./views/health.js"
import { submitView } from "./views/submit.js"
import { tasksView } from "./views/tasks.js"
import type { Stop, View } from "./views/view.js"

const routes: ReadonlyArray<readonly [RegExp, View, string]> = [
  [/^#\/task\/([0-9a-f]{64})$/, detailView, "Task"],
  [/^#\/submit$/, submitView, "Submit"],
  [/^#\/audit$/, auditView, "Audit"],
  [/^#\/health$/, healthView, "Health"],
  [/^/, tasksView, "Tasks"]
]

let stop: Stop = () => undefined
let first = true

const show = (): void => {
  const main = document.getElementById("main")
  if (!(main instanceof HTMLElement)) return
  stop()
  const hash = window.location.hash
  for (const [pattern, view, title] of routes) {
    const match = pattern.exec(hash)
    if (match === null) continue
    stop = view(main, match[1] ?? "")
    document.title = `${title} · RelayKeep`
    break
  }
  for (const link of document.querySelectorAll("nav a")) {
    const href = link.getAttribute("href") ?? ""
    const current = href === hash || (href === "#/" && (hash === "" || hash === "#/"))
    if (current) link.setAttribute("aria-current", "page")
    else link.removeAttribute("aria-current")
  }
  // After a navigation, keyboard and screen-reader users start at the new view's heading.
  const heading = main.querySelector("h1")
  if (!first && heading instanceof HTMLElement) heading.focus()
  first = false
}

window.addEventListener("hashchange", show)
show()
