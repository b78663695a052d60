import { assert, describe, it } from "@effect/vitest"
import { machineName } from "../../src/services/Host.js"

describe("machineName: how leases name this machine", () => {
  it("RELAYKEEP_HOST wins over the hostname and the pid namespace", () => {
    assert.deepStrictEqual(machineName("build-box-2", "pid:[4026532201]", "vm"), {
      name: "build-box-2",
      ignored: false
    })
  })

  it("is the hostname outside any container", () => {
    assert.deepStrictEqual(machineName(undefined, "pid:[4026531836]", "vm"), { name: "vm", ignored: false })
    // No /proc: no namespace to tell.
    assert.deepStrictEqual(machineName(undefined, undefined, "vm"), { name: "vm", ignored: false })
  })

  it("adds the pid namespace inside a container, so containers sharing a hostname differ", () => {
    const a = machineName(undefined, "pid:[4026532201]", "app")
    const b = machineName(undefined, "pid:[4026532305]", "app")
    assert.strictEqual(a.name, "app/pidns-4026532201")
    assert.notStrictEqual(a.name, b.name)
  })

  it("ignores an invalid RELAYKEEP_HOST, and says so", () => {
    for (const bad of [" spaced", "-flag", "a b", "x".repeat(256), "tab\there"])
      assert.deepStrictEqual(machineName(bad, undefined, "vm"), { name: "vm", ignored: true }, bad)
    // Empty means unset.
    assert.deepStrictEqual(machineName("", undefined, "vm"), { name: "vm", ignored: false })
  })
})
