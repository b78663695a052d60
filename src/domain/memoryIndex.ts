/**
 * A trigram index over a memory store's folded texts, built once per load, so that a search
 * scores only the records that can match instead of every record.
 *
 * A record whose text contains a term contains every three-character window of that term, so
 * the records holding all the windows of all the query's terms are a superset of the hits.
 * Windows are hashed into a fixed number of buckets; two windows sharing a bucket only widen
 * that superset. The candidates are then scored exactly as the plain scan scores every record
 * (`rankMemory`), in file order, so the results are the same, hit for hit.
 */
import type { MemoryHit, StoredMemory } from "./memory.js"
import { searchTerms } from "./memory.js"
import { MemoryScan } from "./memoryScan.js"

const BucketBits = 20
const Buckets = 1 << BucketBits
const WindowLength = 3

export interface MemoryIndex {
  readonly records: ReadonlyArray<StoredMemory>
  /** Bucket b's records are `postings[starts[b]]` up to `postings[starts[b + 1]]`, ascending. */
  readonly starts: Int32Array
  readonly postings: Int32Array
}

const bucketOf = (text: string, at: number): number =>
  (Math.imul(text.charCodeAt(at), 0x9e3779b1) ^
    Math.imul(text.charCodeAt(at + 1), 0x85ebca77) ^
    Math.imul(text.charCodeAt(at + 2), 0xc2b2ae3d)) >>>
  (32 - BucketBits)

/** Call `visit` once per distinct bucket of `text`'s windows, using `seen` to skip repeats. */
const eachBucket = (text: string, mark: number, seen: Int32Array, visit: (bucket: number) => void) => {
  for (let at = 0; at + WindowLength <= text.length; at++) {
    const bucket = bucketOf(text, at)
    if (seen[bucket] === mark) continue
    seen[bucket] = mark
    visit(bucket)
  }
}

/** Build the index: two passes over the texts, counting then filling, with no per-window objects. */
export const indexMemory = (records: ReadonlyArray<StoredMemory>): MemoryIndex => {
  const starts = new Int32Array(Buckets + 1)
  const seen = new Int32Array(Buckets).fill(-1)
  records.forEach((stored, index) =>
    eachBucket(stored.folded, index, seen, (bucket) => {
      starts[bucket + 1] = (starts[bucket + 1] ?? 0) + 1
    })
  )
  for (let bucket = 1; bucket <= Buckets; bucket++)
    starts[bucket] = (starts[bucket] ?? 0) + (starts[bucket - 1] ?? 0)
  const postings = new Int32Array(starts[Buckets] ?? 0)
  const next = starts.slice(0, Buckets)
  seen.fill(-1)
  records.forEach((stored, index) =>
    eachBucket(stored.folded, index, seen, (bucket) => {
      const slot = next[bucket] ?? 0
      postings[slot] = index
      next[bucket] = slot + 1
    })
  )
  return { records, starts, postings }
}

/** The records in both ascending lists, ascending. */
const intersect = (left: Int32Array, right: Int32Array): Int32Array => {
  const out = new Int32Array(Math.min(left.length, right.length))
  let size = 0
  let i = 0
  let j = 0
  while (i < left.length && j < right.length) {
    const a = left[i] ?? 0
    const b = right[j] ?? 0
    if (a === b) {
      out[size++] = a
      i++
      j++
    } else if (a < b) i++
    else j++
  }
  return out.subarray(0, size)
}

/**
 * How many posting lists are intersected at most, the shortest first. Each list only narrows a
 * superset of the hits, which scoring then checks exactly; past the shortest few a list rarely
 * removes much, and a long query has hundreds of windows, each list as long as the store.
 */
const MaxLists = 32

/**
 * The records that may hold every term, ascending; undefined when no term is long enough to
 * narrow the search (then every record is a candidate).
 */
const candidatesOf = (index: MemoryIndex, terms: ReadonlyArray<string>): Int32Array | undefined => {
  const buckets = new Set<number>()
  for (const term of terms)
    for (let at = 0; at + WindowLength <= term.length; at++) buckets.add(bucketOf(term, at))
  if (buckets.size === 0) return undefined
  const lists = [...buckets]
    .map((bucket) => index.postings.subarray(index.starts[bucket] ?? 0, index.starts[bucket + 1] ?? 0))
    .sort((a, b) => a.length - b.length)
  let candidates = lists[0] ?? new Int32Array(0)
  for (const list of lists.slice(1, MaxLists)) {
    if (candidates.length === 0) break
    candidates = intersect(candidates, list)
  }
  return candidates
}

/** The scan of `query`'s candidates in `index`, to be stepped (see MemoryScan). */
export const scanIndexed = (index: MemoryIndex, query: string, limit: number): MemoryScan => {
  const terms = searchTerms(query)
  const candidates = terms.length === 0 ? [] : candidatesOf(index, terms)
  return new MemoryScan(index.records, candidates ?? index.records.keys(), terms, limit)
}

/** `searchMemory(index.records, query, limit)`, answered through the index in one go. */
export const searchIndexed = (index: MemoryIndex, query: string, limit: number): ReadonlyArray<MemoryHit> => {
  const scan = scanIndexed(index, query, limit)
  scan.step(Number.POSITIVE_INFINITY)
  return scan.hits()
}
