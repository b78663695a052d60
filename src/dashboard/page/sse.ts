/**
 * Server-sent events read from a fetched stream, so the request can carry the Bearer header
 * (EventSource cannot set one). Only what /api/events sends is needed: `event:` and `data:`
 * fields, comments (`: keepalive`), events ended by a blank line.
 */

export interface ServerEvent {
  readonly event: string
  readonly data: string
}

/** One event's lines (without the blank line that ended it), or null when it has no data. */
const eventOf = (block: string): ServerEvent | null => {
  let event = "message"
  const data: Array<string> = []
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue
    const colon = line.indexOf(":")
    const name = colon === -1 ? line : line.slice(0, colon)
    const raw = colon === -1 ? "" : line.slice(colon + 1)
    const value = raw.startsWith(" ") ? raw.slice(1) : raw
    if (name === "event") event = value
    else if (name === "data") data.push(value)
  }
  return data.length === 0 ? null : { event, data: data.join("\n") }
}

/**
 * The complete events at the start of `buffer` (text received so far, unread), and what is
 * left of it: the beginning of an event still arriving.
 */
export const splitEvents = (
  buffer: string
): { readonly events: ReadonlyArray<ServerEvent>; readonly rest: string } => {
  // A CR at the very end may be the first half of a CRLF still arriving: it waits for the rest.
  const pending = buffer.endsWith("\r") ? "\r" : ""
  const text = buffer.slice(0, buffer.length - pending.length).replace(/\r\n?/g, "\n")
  const blocks = text.split("\n\n")
  const rest = (blocks.pop() ?? "") + pending
  const events: Array<ServerEvent> = []
  for (const block of blocks) {
    const event = eventOf(block)
    if (event !== null) events.push(event)
  }
  return { events, rest }
}
