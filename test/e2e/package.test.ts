/**
 * The package as users install it: packed, installed into a project of its own (from npm's
 * cache, as after `npm ci`), and run through the bins npm links. Proves that the bundle and the
 * launchers ship, and that nothing they load is left out of the package.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { spawnEnv } from "../support/environment.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
/** Run a linked bin as a user's shell would: the file itself, through its `#!` line. */
const runBin = (file: string, args: ReadonlyArray<string>, env: Readonly<Record<string, string>>) => {
  const result = spawnSync(file, [...args], { env: spawnEnv(env), encoding: "utf8", timeout: 120_000 })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

const npm = (args: ReadonlyArray<string>, cwd: string) =>
  execFileSync("npm", [...args], { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

describe("the installed package", () => {
  it("runs submit, read and the demo through the bins npm links", { timeout: 300_000 }, () => {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), "relaykeep-package-"))
    // --ignore-scripts: the build is already in dist/, and a rebuild would race the other suites.
    const packed: Array<{ filename: string }> = JSON.parse(
      npm(["pack", "--ignore-scripts", "--json", "--pack-destination", work], repo)
    )
    const tarball = path.join(work, packed[0]?.filename ?? "")
    const project = path.join(work, "project")
    fs.mkdirSync(project)
    fs.writeFileSync(path.join(project, "package.json"), JSON.stringify({ name: "consumer", private: true }))
    npm(["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", tarball], project)

    const bin = (name: string) => path.join(project, "node_modules", ".bin", name)
    const root = path.join(work, "root")
    const env = { XDG_CACHE_HOME: path.join(work, "cache") }
    const submitted = runBin(
      bin("relaykeep"),
      ["submit", "--root", root, "--id", "installed", "--payload", '{"provider":"echo"}'],
      env
    )
    assert.strictEqual(submitted.code, 0, submitted.stderr)
    const receipt: { task_id: string; payload_sha256: string } = JSON.parse(submitted.stdout)
    const read = runBin(
      bin("relaykeep"),
      ["read", "--root", root, "--task-id", receipt.task_id, "--sha", receipt.payload_sha256],
      env
    )
    assert.strictEqual(read.code, 0, read.stderr)
    assert.include(read.stdout, '"state":"queued"')

    // The demo spawns relaykeep-tasks and loads the MCP SDK and the worker: the lazily loaded parts.
    const demo = runBin(bin("relaykeep"), ["demo"], env)
    assert.strictEqual(demo.code, 0, demo.stderr)
    assert.include(demo.stdout, "demo passed")
  })
})
