/**
 * Which compile caches the launcher (src/bin/launch.ts) removes once it has written its own:
 * other builds' and foreign names always; of its own build, all but the three Node versions
 * that wrote last.
 */
import { assert, describe, it } from "@effect/vitest"
import { staleCaches } from "../../src/bin/launch.js"

const build = "0123456789abcdef"
const other = "fedcba9876543210"
const node = (n: number) => String(n).repeat(16).slice(0, 16)
const cache = (command: string, ofBuild: string, runtime: string) => `${command}-${ofBuild}-${runtime}.v8`

describe("the compile caches a write leaves behind", () => {
  it("removes other builds' caches and names it does not write, and keeps other files", () => {
    const own = cache("read", build, node(1))
    const present = [
      own,
      cache("submit", build, node(1)),
      cache("read", other, node(1)),
      "read-0123456789abcdef.v8",
      "notes.txt"
    ].map((name) => ({ name, mtimeMs: 1 }))
    assert.sameMembers(
      [...staleCaches(`/cache/${own}`, present)],
      [cache("read", other, node(1)), "read-0123456789abcdef.v8"]
    )
  })

  it("keeps the caches of the three Node versions that wrote last, the writer's among them", () => {
    const own = cache("read", build, node(1))
    const present = [
      { name: own, mtimeMs: 0 },
      { name: cache("read", build, node(2)), mtimeMs: 40 },
      { name: cache("submit", build, node(2)), mtimeMs: 10 },
      { name: cache("read", build, node(3)), mtimeMs: 30 },
      { name: cache("read", build, node(4)), mtimeMs: 20 },
      { name: cache("list", build, node(4)), mtimeMs: 5 }
    ]
    assert.sameMembers(
      [...staleCaches(`/cache/${own}`, present)],
      [cache("read", build, node(4)), cache("list", build, node(4))]
    )
  })
})
