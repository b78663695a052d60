/**
 * A hostile neighbour, for real: a second, unprivileged user (`nobody`, through `runuser`) works
 * against a data root shared on this machine. They cannot read or write a private root; when a
 * root was left writable to them, what they plant there (a config.json naming their own
 * `claude_executable`, a record) is never used, because the victim's RelayKeep refuses the root
 * with the command that fixes it; a root they own is refused by the victim; and a root of their
 * own works for them, so the checks do not refuse a legitimate user.
 *
 * Needs root (to switch users), runuser, and a checkout nobody can read: CI has all three (and
 * sets RELAYKEEP_REQUIRE_NEIGHBOURS=1, which makes their absence a failure); elsewhere the suite
 * skips with one line.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { failureOutput, relaykeep, relaykeepBin, relaykeepWorker } from "../support/cli.js"
import { spawnEnv } from "../support/environment.js"
import { useTempDirs } from "../support/files.js"

const Nobody = "nobody"
const nobodyUid = (): number | undefined => {
  const found = spawnSync("id", ["-u", Nobody], { encoding: "utf8" })
  return found.status === 0 ? Number(found.stdout.trim()) : undefined
}
const canSwitch =
  process.getuid?.() === 0 &&
  nobodyUid() !== undefined &&
  // The built CLI must be readable by nobody: a checkout under a private directory is not.
  spawnSync("runuser", ["-u", Nobody, "--", "test", "-r", relaykeepBin]).status === 0
if (!canSwitch && process.env["RELAYKEEP_REQUIRE_NEIGHBOURS"] === "1")
  throw new Error(
    "RELAYKEEP_REQUIRE_NEIGHBOURS=1, but this process cannot run the built CLI as nobody (root, runuser, a readable checkout)"
  )
if (!canSwitch)
  process.stderr.write("neighbours suite skipped: it needs root, runuser and a checkout nobody can read\n")

const tempDir = useTempDirs()

/** Run `argv` as nobody; arguments are passed as an array, never through a shell. */
const asNobody = (argv: ReadonlyArray<string>) =>
  spawnSync("runuser", ["-u", Nobody, "--", ...argv], { encoding: "utf8", env: spawnEnv(), timeout: 120_000 })

/** A script `nobody` writes, as nobody: JSON-free, no interpolation of anything but our own paths. */
const writeAsNobody = (file: string, content: string, mode = "644") =>
  asNobody([
    process.execPath,
    "-e",
    "require('fs').writeFileSync(process.argv[1], process.argv[2], { mode: parseInt(process.argv[3], 8) })",
    file,
    content,
    mode
  ])

/** A directory shared by every user as /tmp is (mkdtemp makes 0700): anyone may create in it, sticky. */
const sharedDir = () => {
  const dir = tempDir()
  fs.chmodSync(dir, 0o1777)
  return dir
}

const submit = (root: string, id: string) =>
  relaykeep([
    "submit",
    "--root",
    root,
    "--id",
    id,
    "--payload",
    JSON.stringify({ provider: "claude", prompt: "the victim's prompt" })
  ])

describe.skipIf(!canSwitch)("a hostile neighbour (a real second user)", { timeout: 180_000 }, () => {
  it("cannot read or write a private root", async () => {
    const root = path.join(sharedDir(), "root")
    assert.strictEqual((await submit(root, "t1")).code, 0)
    assert.strictEqual(fs.statSync(root).mode & 0o777, 0o700)

    const listed = asNobody([process.execPath, relaykeepBin, "list", "--root", root])
    assert.notStrictEqual(listed.status, 0)
    assert.strictEqual(listed.stdout, "")
    const planted = writeAsNobody(path.join(root, "config.json"), "{}")
    assert.notStrictEqual(planted.status, 0)
    assert.include(planted.stderr, "EACCES")
    assert.isFalse(fs.existsSync(path.join(root, "config.json")))
  })

  it("plants nothing that runs when a root was left world-writable: the root is refused, its mode kept", async () => {
    const shared = sharedDir()
    const root = path.join(shared, "root")
    assert.strictEqual((await submit(root, "t1")).code, 0)
    fs.chmodSync(root, 0o777)

    // The neighbour's executable would leave a mark and would read the victim's prompt.
    const evil = path.join(shared, "evil")
    const mark = path.join(shared, "evil-ran")
    assert.strictEqual(writeAsNobody(evil, `#!/bin/sh\ntouch ${mark}\ncat > /dev/null\n`, "755").status, 0)
    const config = path.join(root, "config.json")
    assert.strictEqual(writeAsNobody(config, JSON.stringify({ claude_executable: evil })).status, 0)

    const worker = await relaykeepWorker(["--root", root])
    const message = failureOutput(worker, 1, "StorageError")
    assert.include(message, `chmod 700 ${root}`)
    assert.isFalse(fs.existsSync(mark), "the neighbour's executable never ran")
    assert.include(failureOutput(await relaykeep(["list", "--root", root]), 1, "StorageError"), "mode 0777")
    assert.strictEqual(fs.statSync(root).mode & 0o777, 0o777, "the mode is the user's to change")

    // Fixed as the message says, the root opens; the planted config.json is now the next refusal.
    fs.chmodSync(root, 0o700)
    const refused = await relaykeepWorker(["--root", root])
    assert.include(failureOutput(refused, 1, "StorageError"), `owned by uid ${nobodyUid()}`)
    assert.isFalse(fs.existsSync(mark))
  })

  it("a root the neighbour made is refused by the victim, naming its owner", async () => {
    const root = path.join(sharedDir(), "theirs")
    const made = asNobody([process.execPath, relaykeepBin, "check", "--root", root])
    assert.strictEqual(made.status, 0, made.stderr)
    fs.chmodSync(root, 0o755)
    const message = failureOutput(await relaykeep(["list", "--root", root]), 1, "StorageError")
    assert.include(message, `is owned by uid ${nobodyUid()}, not by this user (uid 0)`)
  })

  it("a root of the neighbour's own works for them: the checks refuse nobody legitimate", () => {
    const root = path.join(sharedDir(), "own")
    const payload = JSON.stringify({ provider: "echo", prompt: "mine" })
    const submitted = asNobody([
      process.execPath,
      relaykeepBin,
      "submit",
      "--root",
      root,
      "--id",
      "n1",
      "--payload",
      payload
    ])
    assert.strictEqual(submitted.status, 0, submitted.stderr)
    const listed = asNobody([process.execPath, relaykeepBin, "list", "--root", root])
    assert.strictEqual(listed.status, 0, listed.stderr)
    assert.include(listed.stdout, '"state":"queued"')
  })
})
