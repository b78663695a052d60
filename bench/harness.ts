/**
 * The benchmark harness: what a benchmark is, how its runs are taken, and how its figures are
 * judged against its target.
 *
 * A benchmark measures one or more *series* (RelayKeep and its baselines) in the same run, one
 * after the other, so that a noisy machine slows both alike. Each figure is the median of the
 * measured runs; a warm-up run before them is taken and thrown away.
 */

/** One run's figure for each series, in the benchmark's unit. */
export type Figures = Readonly<Record<string, number>>

/** How a benchmark's medians are judged. */
export type Target =
  /** Lower is better (a time): `subject` at most `max` times `baseline`. */
  | { readonly kind: "at-most"; readonly subject: string; readonly baseline: string; readonly max: number }
  /**
   * Higher is better (a rate): each subject series at least `min` times the best of its
   * baselines. `pairs` maps a subject series to the baseline series it is judged against.
   */
  | {
      readonly kind: "at-least-best"
      readonly pairs: ReadonlyArray<{ readonly subject: string; readonly baselines: ReadonlyArray<string> }>
      readonly min: number
    }
  /**
   * Lower is better, several pairs at once: each `subject` at most its own `max` times its
   * `baseline` and, when the pair sets `under`, also under that absolute bound (same unit).
   * Every pair must hold; the ratio reported is the subject-over-baseline ratio of the pair
   * nearest to (or furthest past) its bounds.
   */
  | {
      readonly kind: "each-at-most"
      readonly pairs: ReadonlyArray<{
        readonly subject: string
        readonly baseline: string
        readonly max: number
        readonly under?: number
      }>
    }
  /** A fixed budget: `subject` under `limit` (same unit). */
  | { readonly kind: "under"; readonly subject: string; readonly limit: number }
  /** Reported, not judged. */
  | { readonly kind: "report" }

export interface Verdict {
  /** The judged ratio: subject over baseline (or over the budget); for rates, subject over the best peer. */
  readonly ratio: number | null
  readonly pass: boolean | null
  /** The target, in words: `≤ 1.5× floor`. */
  readonly text: string
}

export interface BenchContext {
  /** A directory of its own, removed after the benchmark. */
  readonly dir: string
  /** Measured runs to take (after the warm-up). */
  readonly runs: number
  /** Progress for the terminal; never part of the result. */
  readonly log: (line: string) => void
}

/** A benchmark set up and ready to run; `run` takes one measurement of every series. */
export interface Session {
  readonly run: (index: number) => Promise<Figures>
  /** Facts to report beside the figures (sizes, memory, versions). Read after the last run. */
  readonly details?: () => Promise<Readonly<Record<string, unknown>>> | Readonly<Record<string, unknown>>
  readonly close: () => Promise<void>
}

export interface Benchmark {
  readonly name: string
  /** One sentence: what is measured. */
  readonly title: string
  /** What the figures are compared with. */
  readonly baseline: string
  readonly unit: string
  readonly target: Target
  /** Prepare the data the runs need. Not measured. */
  readonly setup: (context: BenchContext) => Promise<Session>
}

export const median = (values: ReadonlyArray<number>): number => {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  const upper = sorted[middle] ?? Number.NaN
  if (sorted.length % 2 === 1) return upper
  return ((sorted[middle - 1] ?? upper) + upper) / 2
}

/** The median of each series over the runs. */
export const medians = (runs: ReadonlyArray<Figures>): Record<string, number> => {
  const series = new Set(runs.flatMap((figures) => Object.keys(figures)))
  return Object.fromEntries(
    [...series].map((name) => [name, median(runs.flatMap((figures) => figures[name] ?? []))])
  )
}

const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits

const at = (values: Readonly<Record<string, number>>, name: string): number => values[name] ?? Number.NaN

export const judge = (target: Target, values: Readonly<Record<string, number>>): Verdict => {
  switch (target.kind) {
    case "at-most": {
      const ratio = at(values, target.subject) / at(values, target.baseline)
      return {
        ratio: round(ratio),
        pass: ratio <= target.max,
        text: `${target.subject} ≤ ${target.max}× ${target.baseline}`
      }
    }
    case "at-least-best": {
      // The weakest pair decides: every subject must keep up with its best baseline.
      const ratios = target.pairs.map(
        ({ subject, baselines }) =>
          at(values, subject) / Math.max(...baselines.map((name) => at(values, name)))
      )
      const ratio = Math.min(...ratios)
      const pairs = target.pairs.map(
        ({ subject, baselines }) => `${subject} ≥ best of ${baselines.join(", ")}`
      )
      return { ratio: round(ratio), pass: ratio >= target.min, text: pairs.join("; ") }
    }
    case "each-at-most": {
      const ratios = target.pairs.map((pair) => {
        const value = at(values, pair.subject)
        const ratio = value / at(values, pair.baseline)
        // How far along its bounds a pair is (1 is at a bound): the larger of the two.
        const reach =
          pair.under === undefined ? ratio / pair.max : Math.max(ratio / pair.max, value / pair.under)
        const holds = ratio <= pair.max && (pair.under === undefined || value < pair.under)
        return { ...pair, value, ratio, reach, holds }
      })
      const pass = ratios.every(({ holds }) => holds)
      // NaN (a missing series) sorts nowhere: it is the worst pair, and it fails.
      const worst = ratios.reduce<(typeof ratios)[number] | undefined>(
        (found, pair) =>
          found === undefined || Number.isNaN(pair.reach) || pair.reach > found.reach ? pair : found,
        undefined
      )
      const pairs = ratios.map(({ subject, baseline, max, under, ratio, value }) =>
        under === undefined
          ? `${subject} ≤ ${max}× ${baseline} (${round(ratio)}×)`
          : `${subject} ≤ ${max}× ${baseline} and < ${under} (${round(ratio)}×, ${round(value)})`
      )
      return { ratio: worst === undefined ? null : round(worst.ratio), pass, text: pairs.join("; ") }
    }
    case "under": {
      const ratio = at(values, target.subject) / target.limit
      return { ratio: round(ratio), pass: ratio < 1, text: `${target.subject} < ${target.limit}` }
    }
    case "report":
      return { ratio: null, pass: null, text: "reported only" }
  }
}

/** Run a benchmark: set up, one warm-up run, then `runs` measured runs. */
export const runBenchmark = async (benchmark: Benchmark, context: BenchContext) => {
  const session = await benchmark.setup(context)
  try {
    context.log(`${benchmark.name}: warm-up`)
    await session.run(-1)
    const runs: Array<Figures> = []
    for (let index = 0; index < context.runs; index++) {
      const figures = await session.run(index)
      context.log(`${benchmark.name}: run ${index + 1}/${context.runs} ${describe(figures)}`)
      runs.push(figures)
    }
    const values = medians(runs)
    const verdict = judge(benchmark.target, values)
    const details = session.details ? await session.details() : {}
    return {
      name: benchmark.name,
      title: benchmark.title,
      baseline: benchmark.baseline,
      unit: benchmark.unit,
      medians: Object.fromEntries(Object.entries(values).map(([name, value]) => [name, round(value, 3)])),
      ratio: verdict.ratio,
      target: verdict.text,
      pass: verdict.pass,
      runs: runs.length,
      details
    }
  } finally {
    await session.close()
  }
}

export type BenchResult = Awaited<ReturnType<typeof runBenchmark>>

const describe = (figures: Figures) =>
  Object.entries(figures)
    .map(([name, value]) => `${name}=${round(value, 3)}`)
    .join(" ")
