// Take the screenshots of docs/dashboard.md: a temp data root with a few tasks (echo tasks run by
// one worker pass, a Claude task that fails for want of a `claude` executable, two left queued),
// the built `relaykeep dashboard` on it, and Chromium (RELAYKEEP_TEST_CHROMIUM, else
// /usr/bin/chromium). For the health view, two watching workers: one killed (late once its
// heartbeat is 15 s overdue) and one idle. Run `npm run build` first. Writes
// docs/images/dashboard-*.png.
import { spawn, spawnSync } from "node:child_process"
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { setTimeout as after } from "node:timers/promises"
import { chromium } from "playwright-core"

const bin = path.resolve("dist/bin/relaykeep.js")
const images = path.resolve("docs/images")
const executablePath = process.env.RELAYKEEP_TEST_CHROMIUM || "/usr/bin/chromium"
const dir = mkdtempSync(path.join(tmpdir(), "relaykeep-shots-"))
const root = path.join(dir, "root")
mkdirSync(images, { recursive: true })
const env = { ...process.env, RELAYKEEP_ROOT: root, PATH: "/usr/bin:/bin" }
delete env.RELAYKEEP_STORE

const relaykeep = (...args) => {
  const result = spawnSync(process.execPath, [bin, ...args, "--root", root], { env, encoding: "utf8" })
  if (result.status !== 0 && args[0] === "submit") throw new Error(`relaykeep ${args[0]}: ${result.stderr}`)
  return result.stdout
}
const submit = (id, payload) => relaykeep("submit", "--id", id, "--payload", JSON.stringify(payload))

submit("summarise-release-notes", { message: "Summarise the release notes of 0.1.0" })
submit("translate-readme", { message: "Translate the quick start", language: "fr" })
submit("review-pr-42", { provider: "claude", model: "sonnet", prompt: "Review the open pull request" })
submit("nightly-report", { message: "hello", lines: ["one", "two"] })
relaykeep("worker", "--claude-executable", path.join(dir, "no-such-claude"))
submit("index-docs", { message: "Index the docs folder" })
submit("weekly-digest", { message: "Write the weekly digest" })

const dashboard = spawn(process.execPath, [bin, "dashboard", "--port", "0", "--root", root], { env })
let output = ""
dashboard.stdout.on("data", (chunk) => (output += chunk))
dashboard.stderr.on("data", (chunk) => (output += chunk))
let url = null
for (let waited = 0; url === null; waited += 100) {
  if (waited > 30_000) throw new Error(`no URL from the dashboard: ${output}`)
  await after(100)
  url = /(http:\/\/127\.0\.0\.1:\d+\/#token=[0-9a-f]{64})/.exec(output)?.[1] ?? null
}

const browser = await chromium.launch({ executablePath })
let watcher = null
try {
  const shoot = async (name, options, action) => {
    const context = await browser.newContext(options)
    const page = await context.newPage()
    await page.goto(url)
    await page.getByRole("heading", { name: "Tasks" }).waitFor()
    await page.locator("tbody tr").first().waitFor()
    await action(page)
    await page.waitForTimeout(300)
    await page.screenshot({ path: path.join(images, `dashboard-${name}.png`) })
    await context.close()
    console.log(`docs/images/dashboard-${name}.png`)
  }
  const light = { viewport: { width: 960, height: 600 }, colorScheme: "light" }
  await shoot("tasks", light, async () => {})
  await shoot("detail", { ...light, viewport: { width: 960, height: 900 } }, async (page) => {
    await page.getByRole("link", { name: "review-pr-42" }).click()
    await page.getByRole("heading", { name: /^Task / }).waitFor()
    await page.locator("ol.timeline").waitFor()
  })
  await shoot("submit", light, async (page) => {
    await page.getByRole("link", { name: "Submit" }).click()
    await page.getByLabel("Payload (a JSON object)").fill('["a list is not an object"]')
    await page.getByRole("button", { name: "Submit task" }).click()
    await page.getByRole("alert").waitFor()
  })
  await shoot("narrow-dark", { viewport: { width: 390, height: 700 }, colorScheme: "dark" }, async () => {})

  const watch = (id) =>
    spawn(process.execPath, [bin, "worker", "--watch", "--root", root, "--worker-id", id], {
      env,
      stdio: "ignore"
    })
  const killed = watch("build-box-2")
  await after(2_000)
  killed.kill("SIGKILL")
  await after(16_000)
  watcher = watch("laptop")
  await after(2_000)
  await shoot("health", { ...light, viewport: { width: 960, height: 1000 } }, async (page) => {
    await page.getByRole("link", { name: "Health" }).click()
    await page.locator("figure.chart-figure").waitFor()
    await page.locator("li.worker .badge", { hasText: "late" }).waitFor()
    await page.locator("li.worker .badge", { hasText: "watching" }).waitFor()
  })
} finally {
  await browser.close()
  watcher?.kill("SIGTERM")
  dashboard.kill("SIGTERM")
  rmSync(dir, { recursive: true, force: true })
}
