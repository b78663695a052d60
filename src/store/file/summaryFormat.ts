/**
 * What the summary index's files hold, and how they are read and written (summaryIndex.ts says
 * how the index works): an entry and its line, the manifest and its segments' statistics, the
 * names of journals and of stale-flag claims, and the searches a reader makes in a segment's text.
 */
import { Schema } from "effect"
import { ClientRequestId, isTaskId, PayloadSha256 } from "../../domain/ids.js"
import { EchoProviderName } from "../../domain/provider.js"
import type { TaskRecord, TaskSummary } from "../../domain/Task.js"
import { isTaskState, submissionOrder, toSummary } from "../../domain/Task.js"
import type { ListRequest } from "../../services/TaskStore.js"

/** A task's summary at one revision of its record. */
export interface IndexEntry extends TaskSummary {
  readonly revision: number
}

/** Where a task sorts in submission order: its creation time, then its id. */
export type Key = readonly [created_at: string, task_id: string]

export const SegmentInfo = Schema.Struct({
  file: Schema.String.pipe(Schema.pattern(/^seg-[0-9a-f]{32}\.jsonl$/)),
  /** Entries sort after this key (newest first: they are newer); null for the oldest segment. */
  lower: Schema.NullOr(Schema.Tuple(Schema.String, Schema.String)),
  count: Schema.NonNegativeInt,
  states: Schema.Record({ key: Schema.String, value: Schema.NonNegativeInt }),
  providers: Schema.Record({ key: Schema.String, value: Schema.NonNegativeInt })
})
export type SegmentInfo = typeof SegmentInfo.Type

export const Manifest = Schema.Struct({
  version: Schema.Literal(1),
  /** Bytes of each journal folded into the segments. */
  covers: Schema.Record({ key: Schema.String, value: Schema.NonNegativeInt }),
  /** Newest first; together they partition submission order. */
  segments: Schema.NonEmptyArray(SegmentInfo)
})
export type Manifest = typeof Manifest.Type
export const decodeManifest = Schema.decodeUnknownEither(Schema.parseJson(Manifest))

export const entryOf = (record: TaskRecord, revision: number): IndexEntry => ({
  revision,
  ...toSummary(record)
})

/** One line of a journal or a segment. Its key order is fixed: `findEntry` relies on it. */
export const encodeEntry = (entry: IndexEntry): string =>
  JSON.stringify({
    revision: entry.revision,
    task_id: entry.task_id,
    client_request_id: entry.client_request_id,
    payload_sha256: entry.payload_sha256,
    state: entry.state,
    provider: entry.provider,
    created_at: entry.created_at,
    updated_at: entry.updated_at,
    started_at: entry.started_at,
    finished_at: entry.finished_at,
    attempt: entry.attempt
  })

export const isClientRequestId = Schema.is(ClientRequestId)
export const isPayloadSha256 = Schema.is(PayloadSha256)
export const isNullableString = (value: unknown): value is string | null =>
  value === null || typeof value === "string"

/**
 * An entry from its line, or undefined when the line is not one. A structural check rather
 * than Schema: a page reads hundreds of lines, and the files are the store's own, in a root only
 * its user can write (trust.ts); anything else found there is damage and makes a rebuild.
 */
export const decodeEntry = (line: string): IndexEntry | undefined => {
  let value: unknown
  try {
    value = JSON.parse(line)
  } catch {
    return undefined
  }
  if (typeof value !== "object" || value === null) return undefined
  if (
    !("revision" in value) ||
    typeof value.revision !== "number" ||
    !Number.isSafeInteger(value.revision) ||
    !("task_id" in value) ||
    !isTaskId(value.task_id) ||
    !("client_request_id" in value) ||
    !isClientRequestId(value.client_request_id) ||
    !("payload_sha256" in value) ||
    !isPayloadSha256(value.payload_sha256) ||
    !("state" in value) ||
    !isTaskState(value.state) ||
    !("provider" in value) ||
    !isNullableString(value.provider) ||
    !("created_at" in value) ||
    typeof value.created_at !== "string" ||
    !("updated_at" in value) ||
    typeof value.updated_at !== "string" ||
    !("started_at" in value) ||
    !isNullableString(value.started_at) ||
    !("finished_at" in value) ||
    !isNullableString(value.finished_at) ||
    !("attempt" in value) ||
    typeof value.attempt !== "number"
  )
    return undefined
  return {
    revision: value.revision,
    task_id: value.task_id,
    client_request_id: value.client_request_id,
    payload_sha256: value.payload_sha256,
    state: value.state,
    provider: value.provider,
    created_at: value.created_at,
    updated_at: value.updated_at,
    started_at: value.started_at,
    finished_at: value.finished_at,
    attempt: value.attempt
  }
}

export const keyOf = (entry: { readonly created_at: string; readonly task_id: string }): Key => [
  entry.created_at,
  entry.task_id
]
export const compareKeys = (a: Key, b: Key): number =>
  submissionOrder({ created_at: a[0], task_id: a[1] }, { created_at: b[0], task_id: b[1] })
export const newestFirst = (a: IndexEntry, b: IndexEntry): number => submissionOrder(b, a)

/** The segment a key falls in: the first (newest) whose lower bound it sorts after. */
export const segmentOf = (segments: ReadonlyArray<SegmentInfo>, key: Key): number => {
  const index = segments.findIndex((segment) => segment.lower === null || compareKeys(key, segment.lower) > 0)
  // The last segment has no lower bound, so every key falls somewhere.
  return index === -1 ? segments.length - 1 : index
}

/** Entries grouped by the index of the segment each falls in. */
export const bySegment = (
  manifest: Manifest,
  entries: Iterable<IndexEntry>
): Map<number, Array<IndexEntry>> => {
  const groups = new Map<number, Array<IndexEntry>>()
  for (const entry of entries) {
    const index = segmentOf(manifest.segments, keyOf(entry))
    const group = groups.get(index) ?? []
    group.push(entry)
    groups.set(index, group)
  }
  return groups
}

export const providerKey = (entry: IndexEntry): string => entry.provider ?? EchoProviderName

/** The statistics of a segment's entries, as its manifest line keeps them. */
export const infoOf = (file: string, lower: Key | null, entries: ReadonlyArray<IndexEntry>): SegmentInfo => {
  const states: Record<string, number> = {}
  const providers: Record<string, number> = {}
  for (const entry of entries) {
    states[entry.state] = (states[entry.state] ?? 0) + 1
    providers[providerKey(entry)] = (providers[providerKey(entry)] ?? 0) + 1
  }
  return { file, lower, count: entries.length, states, providers }
}

/** The lines of a segment's text, without their newlines. */
export const linesOf = (text: string): Array<string> => {
  const lines = text.split("\n")
  if (lines[lines.length - 1] === "") lines.pop()
  return lines
}

/**
 * The entry of `taskId` in a segment's text, found by its id rather than by parsing every
 * line: `encodeEntry` writes `task_id` right after `revision`, and ids are unique hex.
 */
export const findEntry = (text: string, taskId: string): IndexEntry | undefined | "damaged" => {
  const at = text.indexOf(`"task_id":"${taskId}"`)
  if (at === -1) return undefined
  const start = text.lastIndexOf("\n", at) + 1
  const end = text.indexOf("\n", at)
  return decodeEntry(text.slice(start, end === -1 ? text.length : end)) ?? "damaged"
}

/** `findEntry` for many ids of one segment: each line's id read once, where `encodeEntry` puts it. */
export const entryFinder = (text: string): ((taskId: string) => IndexEntry | undefined | "damaged") => {
  const starts = new Map<string, number>()
  const marker = `"task_id":"`
  for (let at = text.indexOf(marker); at !== -1; at = text.indexOf(marker, at + 1)) {
    starts.set(text.slice(at + marker.length, at + marker.length + 64), text.lastIndexOf("\n", at) + 1)
  }
  return (taskId) => {
    const start = starts.get(taskId)
    if (start === undefined) return undefined
    const end = text.indexOf("\n", start)
    return decodeEntry(text.slice(start, end === -1 ? text.length : end)) ?? "damaged"
  }
}

/**
 * Whether a search text may be tested against a whole line before the line is parsed: ASCII
 * without what JSON escapes, so that a line holds it (ignoring case) whenever a field does.
 */
export const linePrefilter = (search: string | undefined): ((line: string) => boolean) => {
  if (search === undefined || search === "" || !/^[\x20-\x7e]*$/.test(search) || /["\\]/.test(search))
    return () => true
  const needle = search.toLowerCase()
  return (line) => line.toLowerCase().includes(needle)
}

/**
 * Text every line of a matching entry holds, as `encodeEntry` writes it: the state's, or a
 * named provider's (the echo's entries may say null or its name, so it has none). Quotes inside
 * a JSON string are escaped, so no other field can hold it unescaped: a line without it cannot
 * match, and one with it is parsed and tested in full.
 */
export const lineNeedle = (request: ListRequest): string | undefined =>
  request.state !== undefined
    ? `"state":${JSON.stringify(request.state)}`
    : request.provider !== undefined && request.provider !== EchoProviderName
      ? `"provider":${JSON.stringify(request.provider)}`
      : undefined

/**
 * The lines of a segment's text that hold `needle` (every line without one), in order: found by
 * searching the text, so that a page of one state among thousands of others parses only its own.
 */
export function* linesWith(text: string, needle: string | undefined): Generator<string> {
  if (needle === undefined) {
    yield* linesOf(text)
    return
  }
  let from = 0
  for (;;) {
    const at = text.indexOf(needle, from)
    if (at === -1) return
    const start = text.lastIndexOf("\n", at) + 1
    const newline = text.indexOf("\n", at)
    const end = newline === -1 ? text.length : newline
    yield text.slice(start, end)
    from = end + 1
  }
}

/** The name a rebuild gives the stale flag while it works: `stale-<pid>-<token>`. */
export const staleClaimName = (pid: number, token: string): string => `stale-${pid}-${token}`
export const pidOfStaleClaim = (name: string): number | undefined => {
  const match = /^stale-([1-9][0-9]{0,9})-[0-9a-f]{32}$/.exec(name)
  return match?.[1] === undefined ? undefined : Number(match[1])
}

/** What the name of a journal says: whose it is and its place among that writer's journals. */
export interface JournalName {
  readonly name: string
  readonly boot: string
  readonly pid: number
  /** boot, pid and token: one store instance. */
  readonly writer: string
  readonly seq: number
}

export const JournalPattern = /^([0-9A-Za-z]{1,16})-([1-9][0-9]{0,9})-([0-9a-f]{32})-([0-9]{6})\.jsonl$/
export const parseJournalName = (name: string): JournalName | undefined => {
  const match = JournalPattern.exec(name)
  if (match === null) return undefined
  const [, boot = "", pid = "", token = "", seq = ""] = match
  return { name, boot, pid: Number(pid), writer: `${boot}-${pid}-${token}`, seq: Number(seq) }
}

/** The complete lines of a journal past `from`, and the offset after the last of them. */
export interface JournalTail {
  readonly entries: ReadonlyArray<IndexEntry>
  readonly end: number
  readonly size: number
}
