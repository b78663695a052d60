/**
 * The dashboard in a real browser: Debian's Chromium driven by playwright-core, against the
 * built `relaykeep dashboard` on a temp data root, with real `relaykeep submit` and a real
 * watching worker running the built-in echo. Set RELAYKEEP_TEST_CHROMIUM to the browser's
 * executable (.ci/run does); without it the suite is skipped with one line saying so.
 */
import { afterAll, afterEach, assert, beforeAll, describe, it } from "@effect/vitest"
import type { ChildProcess } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import type { Browser, BrowserContext, Page } from "playwright-core"
import { chromium } from "playwright-core"
import { Effect } from "effect"
import { submitBroadcast } from "../../src/broadcast/submit.js"
import { ClientRequestId } from "../../src/domain/ids.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import { relaykeep, relaykeepBin } from "../support/cli.js"
import { spawnEnv } from "../support/environment.js"
import { useTempDirs } from "../support/files.js"
import { hostFileStoreAt } from "../support/stores.js"
import { waitFor } from "../support/waitFor.js"

const executable = process.env["RELAYKEEP_TEST_CHROMIUM"] ?? ""
const available = executable !== "" && fs.existsSync(executable)
if (!available) {
  process.stdout.write(
    "Dashboard browser tests skipped: set RELAYKEEP_TEST_CHROMIUM to a Chromium executable to run them.\n"
  )
}

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const screenshots = path.join(repo, "test-results")
const tempDir = useTempDirs()

/** How long the page may take to show a change (a bound, never the assertion). */
const Live = 60_000

interface Running {
  readonly child: ChildProcess
  readonly output: () => string
}

const children: Array<ChildProcess> = []

/** The token of a printed URL: after `#token=`. */
const tokenOf = (printed: string): string => /#token=([0-9a-f]{64})$/.exec(printed)?.[1] ?? ""

const start = (args: ReadonlyArray<string>): Running => {
  const child = spawn(process.execPath, [relaykeepBin, ...args], {
    env: spawnEnv(),
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  const chunks: Array<Buffer> = []
  child.stdout?.on("data", (chunk: Buffer) => chunks.push(chunk))
  child.stderr?.on("data", (chunk: Buffer) => chunks.push(chunk))
  return { child, output: () => Buffer.concat(chunks).toString("utf8") }
}

const stop = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once("close", () => resolve())
    child.kill("SIGTERM")
  })

describe.skipIf(!available)("the dashboard in Chromium", () => {
  let root = ""
  let url = ""
  let dashboard: Running | undefined
  let browser: Browser | undefined
  let context: BrowserContext | undefined
  let worker: Running | undefined
  /** What the page logged as errors (a CSP violation, an exception): none is expected. */
  let problems: Array<string> = []
  /** Every request the page sent to /api/, with the Authorization header it carried. */
  let apiRequests: Array<{ readonly path: string; readonly authorization: string | undefined }> = []
  /** Every Set-Cookie any answer carried: none is expected. */
  let cookiesSet: Array<string> = []

  beforeAll(async () => {
    fs.mkdirSync(screenshots, { recursive: true })
    root = path.join(tempDir(), "root")
    dashboard = start(["dashboard", "--port", "0", "--root", root])
    const running = dashboard
    url = await waitFor(
      () => `the dashboard's URL; it printed: ${running.output()}`,
      () =>
        /RelayKeep dashboard: (http:\/\/127\.0\.0\.1:\d+\/#token=[0-9a-f]{64})\n/.exec(running.output())?.[1],
      30_000
    )
    browser = await chromium.launch({ executablePath: executable })
  })

  afterEach(async () => {
    const logged = problems
    problems = []
    const cookies = cookiesSet
    cookiesSet = []
    // The page asked the API, and every time with the printed token as a Bearer header.
    const requests = apiRequests
    apiRequests = []
    const token = tokenOf(url)
    assert.deepStrictEqual(
      requests.filter((request) => request.authorization !== `Bearer ${token}`),
      [],
      "API requests without the Bearer token"
    )
    assert.deepStrictEqual(cookies, [], "Set-Cookie headers")
    assert.deepStrictEqual((await context?.cookies()) ?? [], [], "cookies in the browser")
    await context?.close()
    context = undefined
    if (worker !== undefined) await stop(worker.child)
    worker = undefined
    assert.deepStrictEqual(logged, [], "errors the page logged")
  })

  afterAll(async () => {
    await browser?.close()
    for (const child of children.splice(0)) await stop(child)
  })

  /** A fresh browser profile (no token, no cookie), recording what the page sends and gets. */
  const freshPage = async (): Promise<Page> => {
    if (browser === undefined) throw new Error("Chromium did not start")
    context = await browser.newContext({ viewport: { width: 1000, height: 720 } })
    const page = await context.newPage()
    page.on("pageerror", (error) => problems.push(`exception: ${error.message}`))
    page.on("console", (message) => {
      // A refusal the test provokes (409) is logged by Chromium as a failed resource: not a problem.
      if (message.type() === "error" && !message.text().startsWith("Failed to load resource")) {
        problems.push(message.text())
      }
    })
    page.on("request", (request) => {
      const target = new URL(request.url())
      if (target.pathname.startsWith("/api/"))
        apiRequests.push({ path: target.pathname, authorization: request.headers()["authorization"] })
    })
    page.on("response", async (response) => {
      const setCookie = await response.headerValue("set-cookie").catch(() => null)
      if (setCookie !== null) cookiesSet.push(`${response.url()}: ${setCookie}`)
    })
    return page
  }

  /** A fresh browser profile that opened the printed URL (the token in its fragment). */
  const open = async (): Promise<Page> => {
    const page = await freshPage()
    const response = await page.goto(url)
    assert.strictEqual(response?.status(), 200)
    await page.getByRole("heading", { name: "Tasks" }).waitFor()
    // The page took the token out of the address bar (and its history entry) at once.
    assert.notInclude(page.url(), "token")
    assert.strictEqual(new URL(page.url()).hash, "")
    return page
  }

  const shoot = (page: Page, name: string) =>
    page.screenshot({ path: path.join(screenshots, `dashboard-${name}.png`), fullPage: true })

  it("shows a submitted task, turns it complete live while a worker runs, and opens its detail", async () => {
    const page = await open()
    // Set on the document now: still there at the end only if the page never reloaded.
    await page.evaluate("document.body.setAttribute('data-test-marker', 'unchanged')")

    const submitted = await relaykeep([
      "submit",
      "--root",
      root,
      "--id",
      "browser-live",
      "--payload",
      '{"prompt":"hello from the browser test"}'
    ])
    assert.strictEqual(submitted.code, 0, submitted.stderr)
    const row = page.locator("tr", { has: page.getByRole("link", { name: "browser-live", exact: true }) })
    await row.locator(".badge", { hasText: "queued" }).waitFor({ timeout: Live })
    assert.strictEqual(await row.locator("td").nth(2).textContent(), "fake-echo")

    worker = start(["worker", "--watch", "--root", root, "--poll", "1s"])
    await row.locator(".badge", { hasText: "complete" }).waitFor({ timeout: Live })
    assert.strictEqual(await page.locator("body").getAttribute("data-test-marker"), "unchanged")
    await shoot(page, "tasks")

    await row.getByRole("link", { name: "browser-live", exact: true }).click()
    await page.getByRole("heading", { name: "Task complete" }).waitFor({ timeout: Live })
    const result = page.locator("h2:text-is('Result') + pre")
    assert.include(await result.textContent(), '"prompt": "hello from the browser test"')
    assert.strictEqual(await page.getByText("Attempt 1", { exact: true }).count(), 1)
    assert.strictEqual(await page.getByRole("button", { name: "Cancel task…" }).count(), 0)
    await shoot(page, "detail")
  }, 180_000)

  it("cancels a queued task after the confirmation, and not before", async () => {
    const page = await open()
    await page.getByRole("link", { name: "Submit" }).click()
    await page.getByLabel("Payload (a JSON object)").fill('{"prompt":"cancel me"}')
    await page.getByLabel("Request id (optional)").fill("browser-cancel")
    await page.getByRole("button", { name: "Submit task" }).click()
    await page.getByRole("heading", { name: "Task queued" }).waitFor({ timeout: Live })

    // The first press only asks; keeping the task leaves it queued.
    await page.getByRole("button", { name: "Cancel task…" }).click()
    await page.getByText("Cancel this task?").waitFor()
    await page.getByRole("button", { name: "Keep it" }).click()
    const kept = await relaykeep(["list", "--root", root, "--state", "queued"])
    assert.include(kept.stdout, "browser-cancel")

    await page.getByRole("button", { name: "Cancel task…" }).click()
    await page.getByRole("button", { name: "Yes, cancel it" }).waitFor()
    // Keyboard users land on the confirmation.
    assert.strictEqual(await page.locator("button:focus").textContent(), "Yes, cancel it")
    await shoot(page, "cancel-confirm")
    await page.keyboard.press("Enter")
    await page.getByRole("heading", { name: "Task cancelled" }).waitFor({ timeout: Live })
    await page.reload()
    await page.getByRole("heading", { name: "Task cancelled" }).waitFor({ timeout: Live })
    const listed = await relaykeep(["list", "--root", root, "--state", "cancelled"])
    assert.include(listed.stdout, "browser-cancel")
    await shoot(page, "cancelled")
  }, 120_000)

  it("refuses a bad payload with a message, before sending it, and shows the API's own refusal", async () => {
    const page = await open()
    const posts: Array<string> = []
    page.on("request", (request) => {
      if (request.method() === "POST") posts.push(request.url())
    })
    await page.getByRole("link", { name: "Submit" }).click()
    const payload = page.getByLabel("Payload (a JSON object)")
    const submit = page.getByRole("button", { name: "Submit task" })

    await payload.fill('["not", "an", "object"]')
    await submit.click()
    await page.getByRole("alert").filter({ hasText: "payload: must be a JSON object" }).waitFor()
    assert.strictEqual(await payload.getAttribute("aria-invalid"), "true")

    await payload.fill('{"prompt": ')
    await submit.click()
    await page.getByRole("alert").filter({ hasText: "payload: not valid JSON" }).waitFor()
    await shoot(page, "invalid")
    assert.deepStrictEqual(posts, [])

    // Same request id, another payload: only the API knows, and the page shows its answer.
    const first = await relaykeep(["submit", "--root", root, "--id", "browser-conflict", "--payload", "{}"])
    assert.strictEqual(first.code, 0, first.stderr)
    await page.getByLabel("Request id (optional)").fill("browser-conflict")
    await payload.fill('{"prompt":"a different payload"}')
    await submit.click()
    await page.getByRole("alert").filter({ hasText: "ConflictError" }).waitFor({ timeout: Live })
    assert.strictEqual(posts.length, 1)
  }, 120_000)

  it("shows health, the activity chart and the audit log, with hostile text as text", async () => {
    const hostile = '<img src=x onerror="document.title=1">'
    const submitted = await relaykeep(["submit", "--root", root, "--id", hostile, "--payload", "{}"])
    assert.strictEqual(submitted.code, 0, submitted.stderr)
    const time = new Date().toISOString()
    fs.mkdirSync(path.join(root, "audit"), { recursive: true })
    const entry = {
      time,
      server: "relaykeep-tasks",
      tool: "cancel_task",
      status: "denied",
      duration_ms: 3,
      arguments: { task_id: hostile },
      error: { tag: "ConfirmationRequired", message: hostile }
    }
    fs.appendFileSync(path.join(root, "audit", `${time.slice(0, 10)}.jsonl`), `${JSON.stringify(entry)}\n`)

    const page = await open()
    await page.getByRole("link", { name: hostile, exact: true }).waitFor()
    await page.getByRole("link", { name: "Health" }).click()
    await page.getByRole("heading", { name: "Last hour" }).waitFor({ timeout: Live })
    assert.isAbove(await page.locator("svg.chart rect").count(), 0, "bars for this hour's tasks")
    // The worker of the first test stopped and took its entry with it.
    await page
      .getByText("No worker is watching this queue, and none holds a task.")
      .waitFor({ timeout: Live })

    // An idle watching worker shows with its heartbeat, and goes once it stops.
    worker = start(["worker", "--watch", "--root", root, "--poll", "1s", "--worker-id", "browser-watcher"])
    const watcher = page.locator("li.worker", { hasText: "browser-watcher" })
    await watcher.locator(".badge", { hasText: "watching" }).waitFor({ timeout: Live })
    assert.match((await watcher.textContent()) ?? "", /heartbeat [\d.]+ s ago/)
    assert.include(await watcher.textContent(), "idle")
    await shoot(page, "health")
    await stop(worker.child)
    worker = undefined
    await page
      .getByText("No worker is watching this queue, and none holds a task.")
      .waitFor({ timeout: Live })

    await page.getByRole("link", { name: "Audit" }).click()
    const row = page.locator("tbody tr", { hasText: "cancel_task" })
    await row.waitFor({ timeout: Live })
    assert.strictEqual(await row.locator(".badge").textContent(), "denied")
    assert.include(await row.textContent(), `ConfirmationRequired: ${hostile}`)
    await page.getByLabel("Outcome").selectOption("ok")
    await page.getByRole("button", { name: "Filter" }).click()
    await page.getByText("No entries match.").waitFor({ timeout: Live })
    // Nothing the API returned became markup: no image, and the title is the page's own.
    assert.strictEqual(await page.locator("main img").count(), 0)
    assert.strictEqual(await page.title(), "Audit · RelayKeep")
    await shoot(page, "audit")
  }, 120_000)

  it("filters by request id and pages back with Older and forward with Newer", async () => {
    // Through the API with the printed token as a Bearer token: 55 submits in a moment.
    const token = tokenOf(url)
    for (let index = 0; index < 55; index++) {
      const response = await fetch(new URL("/api/tasks", url), {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: JSON.stringify({ payload: { index }, request_id: `paging-${String(index).padStart(2, "0")}` })
      })
      assert.strictEqual(response.status, 201, await response.text())
    }
    const page = await open()
    await page.getByLabel("Search").fill("paging-")
    await page.getByRole("button", { name: "Filter" }).click()
    // Tasks submitted in the same millisecond are ordered by task id, so the test looks at the
    // pages as sets: the newest task on the first, the oldest on the second, none on both.
    const shown = async () => new Set(await page.locator("tbody tr td.request a").allTextContents())
    await page.getByText("50 tasks shown.").waitFor({ timeout: Live })
    const newest = await shown()
    assert.isTrue(newest.has("paging-54"))

    await page.getByRole("button", { name: "Older" }).click()
    await page.getByText("5 tasks shown.").waitFor({ timeout: Live })
    const oldest = await shown()
    assert.isTrue(oldest.has("paging-00"))
    assert.strictEqual(new Set([...newest, ...oldest]).size, 55)
    assert.strictEqual(await page.getByRole("button", { name: "Older" }).count(), 0)
    await shoot(page, "older")

    await page.getByRole("button", { name: "Newer" }).click()
    await page.getByText("50 tasks shown.").waitFor({ timeout: Live })
    assert.deepStrictEqual(await shown(), newest)
    assert.strictEqual(await page.getByRole("button", { name: "Newer" }).count(), 0)
  }, 120_000)
  it("holds the token in the tab alone: no cookie, gone from the address bar, kept on reload, absent elsewhere", async () => {
    const page = await open()
    const token = tokenOf(url)
    await page
      .getByText(/tasks shown\.|No tasks match\./)
      .first()
      .waitFor({ timeout: Live })
    assert.strictEqual(await page.evaluate("document.cookie"), "")
    assert.strictEqual(
      await page.evaluate("window.sessionStorage.getItem('relaykeep.dashboard.token')"),
      token
    )
    // Nor is it in the history: the entry before is the blank tab, the entry itself is "/".
    await page.goBack()
    assert.strictEqual(page.url(), "about:blank")
    await page.goForward()
    assert.strictEqual(new URL(page.url()).pathname + new URL(page.url()).hash, "/")
    await page.getByRole("heading", { name: "Tasks" }).waitFor()
    // The live stream is up, on the Bearer header too.
    await page.locator("#live", { hasText: "live" }).waitFor({ timeout: Live })
    assert.isTrue(apiRequests.some((request) => request.path === "/api/events"))

    // A reload in the same tab: the token comes from sessionStorage, the data loads again.
    const before = apiRequests.length
    await page.reload()
    await page.getByRole("heading", { name: "Tasks" }).waitFor()
    await page
      .getByText(/tasks shown\.|No tasks match\./)
      .first()
      .waitFor({ timeout: Live })
    assert.isAbove(apiRequests.filter((request) => request.path === "/api/tasks").length, 0)
    assert.isAbove(apiRequests.length, before)
    assert.notInclude(page.url(), "token")
    await shoot(page, "reloaded")
    await context?.close()

    // Another profile with the URL but not its fragment: a message, and no API request at all.
    apiRequests = []
    const bare = await freshPage()
    const response = await bare.goto(url.replace(/#.*$/, ""))
    assert.strictEqual(response?.status(), 200)
    await bare.getByRole("heading", { name: "Open the URL that relaykeep dashboard printed" }).waitFor()
    assert.include(await bare.getByRole("alert").textContent(), "relaykeep dashboard")
    assert.strictEqual(await bare.title(), "Open the printed URL · RelayKeep")
    await shoot(bare, "no-token")
    assert.deepStrictEqual(apiRequests, [], "requests without a token")
    // The URL of an earlier start (another token) pasted into that tab: the API refuses it, and
    // the page says to open the printed URL.
    const stale = token === "0".repeat(64) ? "1".repeat(64) : "0".repeat(64)
    await bare.goto(url.replace(token, stale))
    await bare.getByRole("heading", { name: "Tasks" }).waitFor({ timeout: Live })
    await bare.getByText("this tab holds no token this dashboard accepts").first().waitFor({ timeout: Live })
    assert.notInclude(bare.url(), "token")
    assert.isAbove(apiRequests.length, 0)
    assert.deepStrictEqual(
      apiRequests.filter((request) => request.authorization !== `Bearer ${stale}`),
      [],
      "the stale token, as sent"
    )
    apiRequests = []
    // The printed URL pasted into the same tab changes only the fragment (no reload): the page
    // takes the new token, loads the tasks, and the live stream reconnects at once with it.
    await bare.goto(url)
    await bare
      .getByText(/tasks shown\.|No tasks match\./)
      .first()
      .waitFor({ timeout: Live })
    await bare.locator("#live", { hasText: "live" }).waitFor({ timeout: 10_000 })
    assert.notInclude(bare.url(), "token")
    assert.isTrue(apiRequests.some((request) => request.path === "/api/events"))
  }, 120_000)

  it("shows a broadcast's members side by side, live while a worker runs them, with links both ways", async () => {
    // Submitted in-process through the real file store, as `relaykeep submit --broadcast` does.
    const receipt = await Effect.runPromise(
      Effect.scoped(
        Effect.flatMap(hostFileStoreAt(root), (store) =>
          submitBroadcast({
            clientRequestId: ClientRequestId.make("browser-broadcast"),
            targets: [
              { provider: "fake-echo", model: "model-a" },
              { provider: "fake-echo", model: "model-b" }
            ],
            payload: { prompt: "one prompt, two answers" }
          }).pipe(Effect.provideService(TaskStore, store))
        )
      )
    )
    const page = await open()
    // The table shows the group record as a broadcast, its provider a link to the group's page.
    const row = page.locator("tr", {
      has: page.getByRole("link", { name: "browser-broadcast", exact: true })
    })
    await row.waitFor({ timeout: Live })
    await row.getByRole("link", { name: "broadcast", exact: true }).click()
    await page.getByRole("heading", { name: "Group running" }).waitFor({ timeout: Live })
    assert.strictEqual(new URL(page.url()).hash, `#/group/${receipt.group_id}`)
    const card = (model: string) => page.getByRole("article", { name: `fake-echo · ${model}` })
    const [a, b] = [card("model-a"), card("model-b")]
    await a.locator(".badge", { hasText: "queued" }).waitFor({ timeout: Live })
    await b.locator(".badge", { hasText: "queued" }).waitFor({ timeout: Live })

    worker = start(["worker", "--watch", "--root", root, "--poll", "1s"])
    await page.getByRole("heading", { name: "Group complete" }).waitFor({ timeout: Live })
    for (const { member, model } of [
      { member: a, model: "model-a" },
      { member: b, model: "model-b" }
    ]) {
      await member.locator(".badge", { hasText: "complete" }).waitFor({ timeout: Live })
      const result = (await member.locator("h3:text-is('Result') + pre").textContent()) ?? ""
      assert.include(result, `"model": "${model}"`)
      assert.include(result, '"prompt": "one prompt, two answers"')
    }
    assert.include(await page.locator(".facts").first().textContent(), "2 complete")
    // Side by side: the two cards share a row, the first on the left.
    const [boxA, boxB] = [await a.boundingBox(), await b.boundingBox()]
    if (boxA === null || boxB === null) return assert.fail("the cards are not laid out")
    assert.strictEqual(boxA.y, boxB.y)
    assert.isBelow(boxA.x + boxA.width, boxB.x)
    await shoot(page, "group")

    // A member's link opens its task, which leads back to its group.
    const [first] = receipt.members
    await a.getByRole("link", { name: /^Task / }).click()
    await page.getByRole("heading", { name: "Task complete" }).waitFor({ timeout: Live })
    assert.strictEqual(new URL(page.url()).hash, `#/task/${first?.task_id ?? ""}`)
    await page.getByRole("link", { name: "its group, side by side" }).click()
    await page.getByRole("heading", { name: "Group complete" }).waitFor({ timeout: Live })
    // The group's own record, and from it the way back.
    await page.getByRole("link", { name: "The group's own record" }).click()
    await page.getByRole("heading", { name: "Task complete" }).waitFor({ timeout: Live })
    assert.strictEqual(new URL(page.url()).hash, `#/task/${receipt.group_id}`)
    await page.getByRole("link", { name: "its members side by side" }).click()
    await page.getByRole("heading", { name: "Group complete" }).waitFor({ timeout: Live })
    assert.strictEqual(await page.title(), "Group · RelayKeep")
  }, 180_000)
})
