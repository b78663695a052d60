/**
 * The bins' compile cache (src/bin/launch.ts): written on the first run into a private
 * directory, used by the next, rebuilt when damaged, never used from a directory others can
 * write, and never needed for a command to work.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { relaykeepBin, run } from "../support/cli.js"

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), "relaykeep-launch-"))

/** A root holding one task, and the arguments that read it. */
const withTask = async (cacheHome: string) => {
  const root = path.join(tempDir(), "root")
  const env = { XDG_CACHE_HOME: cacheHome, RELAYKEEP_COMPILE_CACHE: "on" }
  const submitted = await run(
    relaykeepBin,
    ["submit", "--root", root, "--id", "launch", "--payload", '{"provider":"echo"}'],
    { env }
  )
  assert.strictEqual(submitted.code, 0, submitted.stderr)
  const receipt: { task_id: string; payload_sha256: string } = JSON.parse(submitted.stdout)
  return {
    env,
    readArgs: ["read", "--root", root, "--task-id", receipt.task_id, "--sha", receipt.payload_sha256]
  }
}

const cacheFiles = (cacheHome: string) => {
  const dir = path.join(cacheHome, "relaykeep", "compile")
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((name) => name.endsWith(".v8")) : []
}

describe("the compile cache", () => {
  it("is written 0600 in a 0700 directory on the first run, one per command, and used by the next", async () => {
    const cacheHome = tempDir()
    const { env, readArgs } = await withTask(cacheHome)
    const first = await run(relaykeepBin, readArgs, { env })
    assert.strictEqual(first.code, 0, first.stderr)
    const dir = path.join(cacheHome, "relaykeep", "compile")
    assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
    const files = cacheFiles(cacheHome)
    assert.deepStrictEqual(files.map((name) => name.split("-")[0]).sort(), ["read", "submit"])
    for (const name of files) assert.strictEqual(fs.statSync(path.join(dir, name)).mode & 0o777, 0o600)

    const readCache = path.join(dir, files.find((name) => name.startsWith("read-")) ?? "")
    const written = fs.statSync(readCache).mtimeMs
    const second = await run(relaykeepBin, readArgs, { env })
    assert.strictEqual(second.stdout, first.stdout)
    // Accepted, so not written again.
    assert.strictEqual(fs.statSync(readCache).mtimeMs, written)
  })

  it("is rewritten when it is damaged, and the command still works", async () => {
    const cacheHome = tempDir()
    const { env, readArgs } = await withTask(cacheHome)
    const first = await run(relaykeepBin, readArgs, { env })
    const dir = path.join(cacheHome, "relaykeep", "compile")
    const readCache = path.join(dir, cacheFiles(cacheHome).find((name) => name.startsWith("read-")) ?? "")
    fs.writeFileSync(readCache, "not a V8 code cache")

    const again = await run(relaykeepBin, readArgs, { env })
    assert.strictEqual(again.code, 0, again.stderr)
    assert.strictEqual(again.stdout, first.stdout)
    assert.notStrictEqual(fs.readFileSync(readCache, "utf8"), "not a V8 code cache")
  })

  it("is not used from a directory that others can write, nor when turned off", async () => {
    const cacheHome = tempDir()
    const dir = path.join(cacheHome, "relaykeep", "compile")
    fs.mkdirSync(dir, { recursive: true })
    fs.chmodSync(dir, 0o777)
    const { env, readArgs } = await withTask(cacheHome)
    const shared = await run(relaykeepBin, readArgs, { env })
    assert.strictEqual(shared.code, 0, shared.stderr)
    assert.deepStrictEqual(cacheFiles(cacheHome), [])

    const offHome = tempDir()
    const off = await run(relaykeepBin, readArgs, {
      env: { XDG_CACHE_HOME: offHome, RELAYKEEP_COMPILE_CACHE: "off" }
    })
    assert.strictEqual(off.stdout, shared.stdout)
    assert.isFalse(fs.existsSync(path.join(offHome, "relaykeep")))
  })

  it("drops the caches of other builds when it writes its own", async () => {
    const cacheHome = tempDir()
    const dir = path.join(cacheHome, "relaykeep", "compile")
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    fs.writeFileSync(path.join(dir, "read-0123456789abcdef.v8"), "an older build's cache", { mode: 0o600 })
    const { env, readArgs } = await withTask(cacheHome)
    assert.strictEqual((await run(relaykeepBin, readArgs, { env })).code, 0)
    assert.notInclude(cacheFiles(cacheHome), "read-0123456789abcdef.v8")
    assert.strictEqual(cacheFiles(cacheHome).length, 2)
  })

  it("keeps the caches another Node version wrote for the same build", async () => {
    const cacheHome = tempDir()
    const { env, readArgs } = await withTask(cacheHome)
    assert.strictEqual((await run(relaykeepBin, readArgs, { env })).code, 0)
    const dir = path.join(cacheHome, "relaykeep", "compile")
    const readCache = cacheFiles(cacheHome).find((name) => name.startsWith("read-")) ?? ""
    const build = /^read-([0-9a-f]{16})-[0-9a-f]{16}\.v8$/.exec(readCache)?.[1]
    assert.isDefined(build, readCache)
    // As another Node would have written it: same build, another runtime.
    const otherNode = `read-${build}-ffffffffffffffff.v8`
    fs.writeFileSync(path.join(dir, otherNode), "another Node's cache", { mode: 0o600 })
    // This Node's cache is written again (it was removed), which is when others are dropped.
    fs.unlinkSync(path.join(dir, readCache))
    assert.strictEqual((await run(relaykeepBin, readArgs, { env })).code, 0)
    assert.includeMembers(cacheFiles(cacheHome), [readCache, otherNode])
  })
})
