/**
 * Newline-delimited framing for the stdio transport, with a size limit that holds while a line
 * is still arriving: a line over the limit is counted and skipped, never held whole, and only
 * its first and last bytes are kept, to find the request id it may carry.
 */

export type RequestId = string | number

export type Framed =
  | { readonly _tag: "Line"; readonly bytes: Buffer }
  | { readonly _tag: "Oversized"; readonly bytes: number; readonly id: RequestId | null }

/** Enough of either end of a line to hold `"jsonrpc":"2.0","id":…` or `,"id":…}`. */
const EndBytes = 512

const IdValue = String.raw`(-?(?:0|[1-9][0-9]{0,15})(?![0-9.eE])|"[^"\\\u0000-\u001f]{0,200}")`
/** The id as the first member after string members `jsonrpc` and `method`: surely top level. */
const IdAtStart = new RegExp(
  String.raw`^\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]{0,64}"\s*,)*\s*"id"\s*:\s*${IdValue}`
)
/** The id as the last member: what closes the line is the message's own brace. */
const IdAtEnd = new RegExp(String.raw`,\s*"id"\s*:\s*${IdValue}\s*\}\s*$`)

const idFrom = (match: RegExpExecArray | null): RequestId | null => {
  const token = match?.[1]
  if (token === undefined) return null
  if (token.startsWith('"')) return token.slice(1, -1)
  const id = Number(token)
  return Number.isSafeInteger(id) ? id : null
}

/**
 * The request id of a message that could not be read whole, when it is plainly at its start or
 * its end (the SDK's client writes it last); null otherwise. Only ids without escapes are
 * recognised: this is a courtesy to the client, so that its request ends, not a parser.
 */
export const recoverRequestId = (head: string, tail: string): RequestId | null =>
  idFrom(IdAtStart.exec(head)) ?? idFrom(IdAtEnd.exec(tail))

/** The first `count` bytes of `parts`, copied. */
const firstBytes = (parts: ReadonlyArray<Buffer>, count: number): Buffer =>
  Buffer.concat(
    parts,
    Math.min(
      count,
      parts.reduce((total, part) => total + part.length, 0)
    )
  )

/** The last `count` bytes of `parts`, copied, without copying the rest. */
const lastBytes = (parts: ReadonlyArray<Buffer>, count: number): Buffer => {
  const kept: Array<Buffer> = []
  let total = 0
  for (let index = parts.length - 1; index >= 0 && total < count; index -= 1) {
    const part = parts[index]?.subarray(-(count - total)) ?? Buffer.alloc(0)
    kept.unshift(part)
    total += part.length
  }
  return Buffer.concat(kept)
}

/** Split a byte stream into lines of at most `maxBytes` (without the newline). */
export const makeLineSplitter = (maxBytes: number) => {
  let parts: Array<Buffer> = []
  let size = 0
  // While skipping an oversized line: its first bytes, its last bytes so far, its length.
  let skipping: { head: Buffer; tail: Buffer; bytes: number } | undefined

  const skip = (part: Buffer) => {
    if (skipping === undefined) {
      const held = [...parts, part]
      skipping = {
        head: firstBytes(held, EndBytes),
        tail: lastBytes(held, EndBytes),
        bytes: size + part.length
      }
      parts = []
      size = 0
    } else {
      const { head, tail, bytes } = skipping
      skipping = { head, tail: lastBytes([tail, part], EndBytes), bytes: bytes + part.length }
    }
  }

  const end = (): Framed => {
    if (skipping !== undefined) {
      const { head, tail, bytes } = skipping
      skipping = undefined
      return {
        _tag: "Oversized",
        bytes,
        id: recoverRequestId(head.toString("latin1"), tail.toString("latin1"))
      }
    }
    const bytes = Buffer.concat(parts)
    parts = []
    size = 0
    return { _tag: "Line", bytes }
  }

  /** The lines that `chunk` completes, in order. */
  return (chunk: Buffer): ReadonlyArray<Framed> => {
    const lines: Array<Framed> = []
    let start = 0
    for (;;) {
      const newline = chunk.indexOf(0x0a, start)
      const part = chunk.subarray(start, newline === -1 ? chunk.length : newline)
      if (skipping !== undefined || size + part.length > maxBytes) skip(part)
      else if (part.length > 0) {
        parts.push(part)
        size += part.length
      }
      if (newline === -1) return lines
      lines.push(end())
      start = newline + 1
    }
  }
}
