/** The file store's claim listing (src/store/file/queueHead.ts): names dropped without copying. */
import { assert, describe, it } from "@effect/vitest"
import { TaskId } from "../../src/domain/ids.js"
import type { Listing } from "../../src/store/file/queueHead.js"
import { makeHints, MaxDroppedNames, namesLeft, withoutNames } from "../../src/store/file/queueHead.js"

const listingOf = (count: number): Listing => ({
  names: Array.from({ length: count }, (_, n) => `name-${String(n).padStart(6, "0")}`),
  start: 0,
  dropped: new Set(),
  stamp: "s0",
  listedAt: 0
})

/** The names a walk would visit, in order. */
const visible = (listing: Listing) =>
  listing.names.slice(listing.start).filter((name) => !listing.dropped.has(name))

describe("the claim listing", () => {
  it("claims from the head move its start and keep the same array", () => {
    const listing = listingOf(5)
    const after = withoutNames(listing, new Set(["name-000000", "name-000001"]), "s1")
    assert.strictEqual(after.names, listing.names, "not copied")
    assert.strictEqual(after.start, 2)
    assert.strictEqual(after.dropped.size, 0)
    assert.strictEqual(after.stamp, "s1")
    assert.deepStrictEqual(visible(after), ["name-000002", "name-000003", "name-000004"])
    assert.strictEqual(namesLeft(after), 3)
  })

  it("a name dropped past a kept one is remembered, and absorbed once the head reaches it", () => {
    const listing = listingOf(4)
    const skipped = withoutNames(listing, new Set(["name-000001"]), "s1")
    assert.strictEqual(skipped.start, 0)
    assert.deepStrictEqual([...skipped.dropped], ["name-000001"])
    assert.deepStrictEqual(visible(skipped), ["name-000000", "name-000002", "name-000003"])
    const head = withoutNames(skipped, new Set(["name-000000"]), "s2")
    assert.strictEqual(head.start, 2)
    assert.strictEqual(head.dropped.size, 0)
    assert.strictEqual(namesLeft(head), 2)
    // The input listings are values: none of them changed.
    assert.strictEqual(listing.start, 0)
    assert.deepStrictEqual([...skipped.dropped], ["name-000001"])
  })

  it("past MaxDroppedNames out of order it compacts into a new array with the same names", () => {
    const listing = listingOf(MaxDroppedNames + 10)
    // Keep the head (a task waiting out a backoff) and drop every other name after it.
    const gone = new Set(listing.names.slice(1))
    const after = withoutNames(listing, gone, "s1")
    assert.notStrictEqual(after.names, listing.names)
    assert.deepStrictEqual(after.names, ["name-000000"])
    assert.strictEqual(after.start, 0)
    assert.strictEqual(after.dropped.size, 0)
    assert.strictEqual(namesLeft(after), 1)
  })
})

describe("the claim hints", () => {
  const task = (n: number) => TaskId.make(n.toString(16).padStart(64, "0"))
  const markerOf = (n: number) => `${String(1_700_000_000_000 + n).padStart(15, "0")}-${task(n)}`

  it("a task that left the queue is forgotten, both its provider and its backoff", () => {
    const hints = makeHints()
    hints.providers.set(task(1), "claude")
    hints.waitingUntil.set(task(1), "2026-12-03T00:00:00.000Z")
    hints.providers.set(task(2), "codex")
    hints.forget(task(1))
    assert.deepStrictEqual([...hints.providers.keys()], [task(2)])
    assert.strictEqual(hints.waitingUntil.size, 0)
  })

  it("hints of tasks other workers took are dropped once they outgrow a fresh listing", () => {
    const hints = makeHints()
    for (let n = 0; n < 10; n++) hints.providers.set(task(n), "claude")
    hints.waitingUntil.set(task(9), "2026-12-03T00:00:00.000Z")
    // No more hints than names: nothing is scanned or dropped, even hints of unlisted tasks.
    hints.keepListed(Array.from({ length: 10 }, (_, n) => markerOf(n + 100)))
    assert.strictEqual(hints.providers.size, 10)
    // Three tasks left in the queue: the hints of the seven others (taken elsewhere) go.
    hints.keepListed([markerOf(2), markerOf(5), markerOf(9)])
    assert.deepStrictEqual([...hints.providers.keys()], [task(2), task(5), task(9)])
    assert.deepStrictEqual([...hints.waitingUntil.keys()], [task(9)])
  })
})
