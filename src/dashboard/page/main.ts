/**
 * The dashboard page: the token from the URL's fragment first (session.ts), then a hash router
 * over six views, or, when this tab holds no token, a message saying where to get one. Plain
 * DOM code bundled by esbuild; see docs/dashboard.md for why there is no framework.
 */
import { h, mount } from "./dom.js"
import { reconnectNow } from "./live.js"
import { currentToken, takeTokenFromLocation } from "./session.js"
import { auditView } from "./views/audit.js"
import { detailView } from "./views/detail.js"
import { groupView } from "./views/group.js"
import { healthView } from "./views/health.js"
import { submitView } from "./views/submit.js"
import { tasksView } from "./views/tasks.js"
import type { Stop, View } from "./views/view.js"

const routes: ReadonlyArray<readonly [RegExp, View, string]> = [
  [/^#\/task\/([0-9a-f]{64})$/, detailView, "Task"],
  [/^#\/group\/([0-9a-f]{64})$/, groupView, "Group"],
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

/** No token in the fragment nor in this tab: nothing to ask the API with. */
const showNoToken = (): void => {
  const main = document.getElementById("main")
  const live = document.getElementById("live")
  if (live !== null) live.textContent = "no token"
  if (!(main instanceof HTMLElement)) return
  document.title = "Open the printed URL · RelayKeep"
  mount(
    main,
    h("h1", { tabindex: "-1" }, "Open the URL that relaykeep dashboard printed"),
    h(
      "p",
      { role: "alert" },
      "This tab holds no dashboard token. Open the URL that the `relaykeep dashboard` command printed " +
        "when it started (it ends in #token=…); a new start prints a new one."
    ),
    h(
      "p",
      { class: "help" },
      "The token stays in this tab only and is sent with each request; no cookie is set."
    )
  )
}

/**
 * At load and at every change of the fragment: a URL pasted into this tab while it is open
 * changes only the fragment (no reload), and its token must be taken all the same.
 */
const route = (): void => {
  const before = currentToken()
  const token = takeTokenFromLocation()
  if (token === null) return showNoToken()
  // A new token (the dashboard was restarted): the event stream reconnects with it now.
  if (before !== null && before !== token) reconnectNow()
  show()
}

window.addEventListener("hashchange", route)
route()
