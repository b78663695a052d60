/**
 * Scoring a search's candidate records, in slices: `MemoryScan.step` does about as much work as
 * it is given and returns, so that a server can let other calls run between slices (and stop a
 * search that takes too long). Run to the end in one step, it is the plain synchronous search.
 */
import type { MemoryHit, StoredMemory } from "./memory.js"

export const SnippetLength = 160

/**
 * What a unit of work costs besides the characters it scans: the loop and bookkeeping around
 * one `indexOf` pass, so that many tiny records count for more than their few characters.
 */
const UnitOverhead = 64
/** An occurrence found costs an `indexOf` call of its own, more than a character scanned. */
const OccurrenceCost = 16

const snippetOf = (text: string, folded: string, term: string): string => {
  const at = Math.max(0, folded.indexOf(term))
  const start = Math.max(0, Math.min(at - Math.floor(SnippetLength / 3), text.length - SnippetLength))
  const body = text.slice(start, start + SnippetLength).replace(/\s+/g, " ")
  return `${start > 0 ? "…" : ""}${body}${start + SnippetLength < text.length ? "…" : ""}`
}

interface Scored {
  readonly hit: StoredMemory
  readonly score: number
  readonly index: number
}

/** Higher score first, then file order: a total order, since indices differ. */
const before = (a: Scored, b: Scored) => b.score - a.score || a.index - b.index

/**
 * The first `limit` hits in that order. A small limit keeps only the best so far (a search
 * for a common word scores tens of thousands of records, and sorting them all would cost more
 * than scoring them); a large one collects and sorts, as `slice(0, limit)` of the sorted whole.
 */
class TopHits {
  private readonly kept: Array<Scored> = []
  private readonly bounded: boolean
  constructor(private readonly limit: number) {
    this.bounded = Number.isInteger(limit) && limit > 0 && limit <= 64
  }
  add(scored: Scored) {
    const kept = this.kept
    if (!this.bounded) {
      kept.push(scored)
      return
    }
    const last = kept[kept.length - 1]
    if (kept.length === this.limit && last !== undefined && before(scored, last) >= 0) return
    let at = kept.length
    while (at > 0 && before(scored, kept[at - 1] ?? scored) < 0) at--
    kept.splice(at, 0, scored)
    if (kept.length > this.limit) kept.pop()
  }
  best(): ReadonlyArray<Scored> {
    return this.bounded ? this.kept : this.kept.sort(before).slice(0, this.limit)
  }
}

/** Non-overlapping occurrences of `needle` in `haystack`, the first of them at `first`. */
const occurrencesFrom = (haystack: string, needle: string, first: number): number => {
  let count = 0
  for (let at = first; at !== -1; at = haystack.indexOf(needle, at + needle.length)) count++
  return count
}

/**
 * The scoring of the records at `indices` (ascending) against `terms`: records holding every
 * term, by total occurrences of the terms, then by file order. Each record is first checked for
 * every term (one `indexOf` each, which stops at the first occurrence), and only a record that
 * holds them all is counted, term by term, from those first occurrences on: a hit's text is
 * scanned once per term, a miss often not to its end. One unit of work is one term on one
 * record, so a slice never runs much past its budget, however large a record is.
 */
export class MemoryScan {
  private readonly indices: Iterator<number>
  private readonly scored: TopHits
  /** Where each term first occurs in the record being scored. */
  private readonly firsts: Array<number>
  /** The record being scored, its index, the next term, whether counting has begun, and the score. */
  private current: StoredMemory | undefined = undefined
  private index = 0
  private term = 0
  private counting = false
  private score = 0
  private finished: boolean

  constructor(
    private readonly records: ReadonlyArray<StoredMemory>,
    indices: Iterable<number>,
    private readonly terms: ReadonlyArray<string>,
    limit: number
  ) {
    this.indices = indices[Symbol.iterator]()
    this.scored = new TopHits(limit)
    this.firsts = terms.map(() => -1)
    this.finished = terms.length === 0
  }

  /** Score on until about `budget` characters' worth of work is done; true once every record is. */
  step(budget: number): boolean {
    let spent = 0
    while (!this.finished && spent < budget) {
      const stored = this.current ?? this.next()
      if (stored === undefined) break
      const folded = stored.folded
      const term = this.terms[this.term] ?? ""
      if (!this.counting) {
        const first = folded.indexOf(term)
        spent += (first === -1 ? folded.length : first) + UnitOverhead
        this.firsts[this.term] = first
        if (first === -1) this.current = undefined
        else if (++this.term === this.terms.length) {
          this.counting = true
          this.term = 0
        }
        continue
      }
      const first = this.firsts[this.term] ?? -1
      const count = occurrencesFrom(folded, term, first)
      spent += folded.length - first + count * OccurrenceCost + UnitOverhead
      this.score += count
      if (++this.term === this.terms.length) {
        // Every term occurs at least once in a hit, so a hit's score is never 0.
        this.scored.add({ hit: stored, score: this.score, index: this.index })
        this.current = undefined
      }
    }
    return this.finished
  }

  /** The best hits so far: all of them, once `step` has returned true. */
  hits(): ReadonlyArray<MemoryHit> {
    const first = this.terms[0] ?? ""
    return this.scored.best().map(({ hit, score }) => ({
      id: hit.record.id,
      snippet: snippetOf(hit.record.text, hit.folded, first),
      source: hit.record.source,
      score
    }))
  }

  private next(): StoredMemory | undefined {
    for (let step = this.indices.next(); !step.done; step = this.indices.next()) {
      const stored = this.records[step.value]
      if (stored === undefined) continue
      this.current = stored
      this.index = step.value
      this.term = 0
      this.counting = false
      this.score = 0
      return stored
    }
    this.finished = true
    return undefined
  }
}

/** Score every record at `indices` in one go and return the best `limit` (see MemoryScan). */
export const rankMemory = (
  records: ReadonlyArray<StoredMemory>,
  indices: Iterable<number>,
  terms: ReadonlyArray<string>,
  limit: number
): ReadonlyArray<MemoryHit> => {
  const scan = new MemoryScan(records, indices, terms, limit)
  scan.step(Number.POSITIVE_INFINITY)
  return scan.hits()
}
