/**
 * Which fragments carry the dashboard's token (src/dashboard/page/fragment.ts): only
 * `#token=` followed by exactly the 64 lowercase hex characters of one; a view's own fragment
 * is left to the router. The browser suite checks the rest (sessionStorage, the address bar).
 */
import { assert, describe, it } from "@effect/vitest"
import { tokenOfFragment } from "../../src/dashboard/page/fragment.js"

const token = "3f9c".repeat(16)

describe("the token in the URL's fragment", () => {
  it("is taken from #token= when it is well formed", () => {
    assert.deepStrictEqual(tokenOfFragment(`#token=${token}`), { _tag: "given", token })
  })

  it("is a token fragment, but no token, when malformed (so it still leaves the address bar)", () => {
    for (const hash of [
      "#token=",
      `#token=${token.toUpperCase()}`,
      `#token=${token}0`,
      "#token=abc",
      `#token=${token}&x=1`
    ])
      assert.deepStrictEqual(tokenOfFragment(hash), { _tag: "given", token: null }, hash)
  })

  it("is no token fragment otherwise: the views' routes and an empty fragment", () => {
    for (const hash of ["", "#", "#/", "#/audit", `#/task/${token}`, `#x-token=${token}`, `#TOKEN=${token}`])
      assert.deepStrictEqual(tokenOfFragment(hash), { _tag: "none" }, hash)
  })
})
