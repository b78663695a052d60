/** Where the data root is, and that it is private: --root, RELAYKEEP_ROOT, XDG_DATA_HOME, HOME. */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { Receipt } from "../../src/domain/Task.js"
import { writerMarkerName } from "../../src/store/file/layout.js"
import { PassReport } from "../../src/worker/pass.js"
import { CheckOutput, jsonOutput, relaykeep } from "../support/cli.js"
import type { RunOptions } from "../support/cli.js"
import { modesUnder, recordFiles, useTempDirs } from "../support/files.js"
import { seedTasks } from "../support/stores.js"

const tempDir = useTempDirs()

/** What a command made under HOME, besides ~/.cache, where the bins keep their compile cache. */
const madeUnder = (home: string) => fs.readdirSync(home).filter((name) => name !== ".cache")

const submit = (args: ReadonlyArray<string>, options: RunOptions) =>
  relaykeep(["submit", "--id", "where", "--payload", '{"where":1}', ...args], options).then((result) =>
    jsonOutput(Receipt, result)
  )

describe("relaykeep data root", { timeout: 120_000 }, () => {
  it("--root wins over RELAYKEEP_ROOT", async () => {
    const base = tempDir()
    const flag = path.join(base, "flag")
    const env = path.join(base, "env")
    const receipt = await submit(["--root", flag], { env: { RELAYKEEP_ROOT: env, HOME: base } })
    assert.deepStrictEqual(recordFiles(flag), [`${receipt.task_id}.json`])
    assert.deepStrictEqual(madeUnder(base), ["flag"])
  })

  it("without --root, RELAYKEEP_ROOT is used, before XDG_DATA_HOME", async () => {
    const base = tempDir()
    const root = path.join(base, "from-env")
    const xdg = path.join(base, "xdg")
    const env = { RELAYKEEP_ROOT: root, XDG_DATA_HOME: xdg, HOME: base }
    const receipt = await submit([], { env })
    assert.deepStrictEqual(recordFiles(root), [`${receipt.task_id}.json`])
    assert.deepStrictEqual(madeUnder(base), ["from-env"])
    // Every command resolves the same root: a worker finds the task there.
    const pass = jsonOutput(PassReport, await relaykeep(["worker"], { env }))
    assert.deepStrictEqual(pass.dispatched, [receipt.task_id])
  })

  it("without RELAYKEEP_ROOT, $XDG_DATA_HOME/relaykeep is used", async () => {
    const base = tempDir()
    const xdg = path.join(base, "xdg")
    const receipt = await submit([], { env: { XDG_DATA_HOME: xdg, HOME: base } })
    assert.deepStrictEqual(recordFiles(path.join(xdg, "relaykeep")), [`${receipt.task_id}.json`])
    assert.deepStrictEqual(madeUnder(base), ["xdg"])
  })

  it("without either, ~/.local/share/relaykeep is used", async () => {
    const home = tempDir()
    const receipt = await submit([], { env: { HOME: home } })
    assert.deepStrictEqual(recordFiles(path.join(home, ".local", "share", "relaykeep")), [
      `${receipt.task_id}.json`
    ])
  })

  it("the root is created 0700, every directory in it 0700 and every file 0600, whatever the umask", async () => {
    const root = path.join(tempDir(), "private")
    const receipt = await submit(["--root", root], { umask: 0 })
    const entries = modesUnder(root)
    const paths = entries.map((entry) => path.relative(root, entry.path))
    for (const expected of ["", "secret", "tasks", `tasks/${receipt.task_id}.json`]) {
      assert.include(paths, expected)
    }
    const wrong = entries.filter((entry) => {
      const isDirectory = fs.statSync(entry.path).isDirectory()
      return entry.mode !== (isDirectory ? "700" : "600")
    })
    assert.deepStrictEqual(wrong, [])
  })

  // Temp files carry their writer's pid; this test process stands in for a live writer.
  const tempFile = (dir: string, pid: number) => path.join(dir, `.tmp-${pid}-${"ab".repeat(16)}`)
  const deadPid = () => spawnSync(process.execPath, ["-e", "0"]).pid
  const deadPidOf = (file: string) => Number(path.basename(file).split("-")[1])

  it("opening a root removes dead writers' temp files and leaves live writers' alone", async () => {
    const root = tempDir()
    await seedTasks(root, [])
    const dead = tempFile(path.join(root, "tasks"), deadPid())
    const live = tempFile(path.join(root, "tasks"), process.pid)
    for (const file of [dead, live]) fs.writeFileSync(file, "{}", { mode: 0o600 })
    // What the dead writer left beside its temp file: the marker it created before writing there.
    const bootId = fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
    const marker = path.join(root, "writers", writerMarkerName(bootId, deadPidOf(dead), "ab".repeat(16)))
    fs.writeFileSync(marker, "", { mode: 0o600 })
    assert.isTrue(jsonOutput(CheckOutput, await relaykeep(["check", "--root", root])).ok)
    assert.deepStrictEqual(
      [fs.existsSync(dead), fs.existsSync(live), fs.existsSync(marker)],
      [false, true, false]
    )
  })

  it("the first open of a root leaves the temp files of live writers alone", async () => {
    // Concurrent first opens: another process has made locks/ and is taking its first lock.
    const root = path.join(tempDir(), "root")
    fs.mkdirSync(path.join(root, "locks"), { recursive: true, mode: 0o700 })
    const live = tempFile(path.join(root, "locks"), process.pid)
    fs.writeFileSync(live, "{}", { mode: 0o600 })
    assert.isTrue(jsonOutput(CheckOutput, await relaykeep(["check", "--root", root])).ok)
    assert.isTrue(fs.existsSync(live), "a live writer's temp file survives the first open")
  })
})
