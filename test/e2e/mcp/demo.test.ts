/** `relaykeep demo` (what `npm run demo` runs): four checked steps, exit 0, no temp root left behind. */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { useMcpTest } from "../../support/mcpStdio.js"
import { relaykeep } from "../../support/mcpProcess.js"

const mcp = useMcpTest()

const demoDirs = (dir: string) => fs.readdirSync(dir).filter((name) => name.startsWith("relaykeep-demo-"))

describe("relaykeep demo", () => {
  it("prints four step lines, exits 0, and removes its temporary root", async () => {
    // A private TMPDIR (os.tmpdir() honours it): the demo's root is made there, and no other
    // test's demo can appear in or vanish from the listing while this one runs.
    const tmp = mcp.tempDir()
    const created: Array<string> = []
    const watcher = fs.watch(tmp, (_, name) => {
      if (name !== null && name.startsWith("relaykeep-demo-") && !created.includes(name)) created.push(name)
    })
    const before = demoDirs(tmp)
    const result = await relaykeep(["demo"], { env: { TMPDIR: tmp } }).finally(() => watcher.close())

    assert.strictEqual(result.code, 0, `exit code; stderr: ${result.stderr}`)
    const lines = result.stdout.split("\n").filter((line) => line !== "")
    const steps = lines.filter((line) => /^✓ \d\. /.test(line))
    assert.deepStrictEqual(
      steps.map((line) => line.slice(0, 4)),
      ["✓ 1.", "✓ 2.", "✓ 3.", "✓ 4."],
      result.stdout
    )
    assert.match(steps[2] ?? "", /ConflictError/)

    assert.deepStrictEqual(before, [])
    assert.strictEqual(created.length, 1, "the demo made its root in TMPDIR")
    assert.deepStrictEqual(demoDirs(tmp), [], "and removed it")
    assert.isFalse(fs.existsSync(path.join(tmp, created[0] ?? "missing")))
  })
})
