/**
 * The page's reader of server-sent events (src/dashboard/page/sse.ts): the frames /api/events
 * sends, however the stream cuts them into chunks, come out as the same events.
 */
import { assert, describe, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import type { ServerEvent } from "../../src/dashboard/page/sse.js"
import { splitEvents } from "../../src/dashboard/page/sse.js"

/** Feed `chunks` one by one, as the page's loop does; every event in order, and what is left. */
const feed = (chunks: ReadonlyArray<string>) => {
  const events: Array<ServerEvent> = []
  let buffer = ""
  for (const chunk of chunks) {
    const split = splitEvents(buffer + chunk)
    events.push(...split.events)
    buffer = split.rest
  }
  return { events, rest: buffer }
}

const frame = (id: string) => `event: task\ndata: {"task_id":"${id}","state":"queued"}\n\n`
const stream = `: connected\n\n${frame("a")}: keepalive\n\n${frame("b")}`

describe("server-sent events in the page", () => {
  it("reads what /api/events sends: comments skipped, one event per frame", () => {
    assert.deepStrictEqual(feed([stream]), {
      events: [
        { event: "task", data: '{"task_id":"a","state":"queued"}' },
        { event: "task", data: '{"task_id":"b","state":"queued"}' }
      ],
      rest: ""
    })
  })

  it("keeps an unfinished frame for the next chunk", () => {
    const split = splitEvents(`${frame("a")}event: task\ndata: {"ta`)
    assert.strictEqual(split.events.length, 1)
    assert.strictEqual(split.rest, 'event: task\ndata: {"ta')
  })

  it("follows the format's rules: default event name, joined data lines, CRLF, no data no event", () => {
    assert.deepStrictEqual(feed(["data: one\r\ndata:two\r\n\r\nevent: empty\n\nid: 7\ndata\n\n"]), {
      events: [
        { event: "message", data: "one\ntwo" },
        { event: "message", data: "" }
      ],
      rest: ""
    })
  })

  it.prop(
    "any cut of the stream into chunks gives the same events",
    [fc.array(fc.integer({ min: 0, max: stream.length }), { maxLength: 12 }), fc.boolean()],
    ([cuts, crlf]) => {
      const text = crlf ? stream.replace(/\n/g, "\r\n") : stream
      const points = [...new Set(cuts.map((cut) => Math.min(cut, text.length)))].sort((a, b) => a - b)
      const chunks = [0, ...points].map((start, index) => text.slice(start, [...points, text.length][index]))
      assert.deepStrictEqual(feed(chunks), feed([stream]))
    }
  )
})
