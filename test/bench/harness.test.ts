/** The benchmark harness: medians, how targets are judged, and the report it writes. */
import { assert, describe, it } from "@effect/vitest"
import type { Benchmark } from "../../bench/harness.js"
import { judge, median, medians, runBenchmark } from "../../bench/harness.js"
import { markdown, terminalTable } from "../../bench/report.js"

describe("the benchmark harness", () => {
  it("takes the median of odd and even counts, and of each series", () => {
    assert.strictEqual(median([5, 1, 3]), 3)
    assert.strictEqual(median([4, 1, 3, 2]), 2.5)
    assert.isNaN(median([]))
    assert.deepStrictEqual(
      medians([
        { a: 1, b: 10 },
        { a: 3, b: 30 },
        { a: 2, b: 20 }
      ]),
      { a: 2, b: 20 }
    )
  })

  it("judges a time against a multiple of its baseline", () => {
    const target = { kind: "at-most", subject: "relaykeep", baseline: "floor", max: 1.5 } as const
    assert.deepStrictEqual(judge(target, { relaykeep: 1.4, floor: 1 }), {
      ratio: 1.4,
      pass: true,
      text: "relaykeep ≤ 1.5× floor"
    })
    assert.isFalse(judge(target, { relaykeep: 1.6, floor: 1 }).pass)
    // A missing series never passes.
    assert.isFalse(judge(target, { floor: 1 }).pass)
  })

  it("judges rates by the weakest pair against the best of its peers", () => {
    const target = {
      kind: "at-least-best",
      min: 1,
      pairs: [
        { subject: "rk.enqueue", baselines: ["a.enqueue", "b.enqueue"] },
        { subject: "rk.process", baselines: ["a.process", "b.process"] }
      ]
    } as const
    const figures = {
      "rk.enqueue": 120,
      "a.enqueue": 100,
      "b.enqueue": 110,
      "rk.process": 90,
      "a.process": 100,
      "b.process": 50
    }
    const verdict = judge(target, figures)
    assert.strictEqual(verdict.ratio, 0.9)
    assert.isFalse(verdict.pass)
    assert.isTrue(judge(target, { ...figures, "rk.process": 100 }).pass)
  })

  it("judges several time pairs, each against its own bound, and reports the one nearest its bound", () => {
    const target = {
      kind: "each-at-most",
      pairs: [
        { subject: "pg.deep", baseline: "pg.shallow", max: 1.25 },
        { subject: "file.deep", baseline: "file.shallow", max: 1.5 }
      ]
    } as const
    const figures = { "pg.deep": 12, "pg.shallow": 10, "file.deep": 13, "file.shallow": 10 }
    assert.deepStrictEqual(judge(target, figures), {
      ratio: 1.2,
      pass: true,
      text: "pg.deep ≤ 1.25× pg.shallow (1.2×); file.deep ≤ 1.5× file.shallow (1.3×)"
    })
    // The file pair is past its bound while the PostgreSQL pair holds: a miss, and the ratio
    // shown is the file pair's, the one furthest past its bound.
    const missed = judge(target, { ...figures, "file.deep": 16 })
    assert.isFalse(missed.pass)
    assert.strictEqual(missed.ratio, 1.6)
    assert.isFalse(judge(target, { ...figures, "pg.deep": 12.6 }).pass)
    // A missing series never passes.
    assert.isFalse(judge(target, { "pg.shallow": 10, "file.deep": 13, "file.shallow": 10 }).pass)
  })

  it("judges a budget, and reports without judging", () => {
    assert.deepStrictEqual(judge({ kind: "under", subject: "query", limit: 50 }, { query: 25 }), {
      ratio: 0.5,
      pass: true,
      text: "query < 50"
    })
    assert.isFalse(judge({ kind: "under", subject: "query", limit: 50 }, { query: 50 }).pass)
    assert.deepStrictEqual(judge({ kind: "report" }, { x: 1 }), {
      ratio: null,
      pass: null,
      text: "reported only"
    })
  })

  it("throws the warm-up away, takes the runs asked for, and reports a miss as MISSED", async () => {
    const seen: Array<number> = []
    let closed = false
    const benchmark: Benchmark = {
      name: "fake",
      title: "A fake.",
      baseline: "nothing",
      unit: "ms",
      target: { kind: "at-most", subject: "slow", baseline: "fast", max: 1.5 },
      setup: async () => ({
        // The warm-up (-1) is far slower; a median that included it would differ.
        run: async (index) => {
          seen.push(index)
          return index === -1 ? { slow: 1000, fast: 1 } : { slow: 2 + index, fast: 1 }
        },
        details: () => ({ size: 3 }),
        close: async () => {
          closed = true
        }
      })
    }
    const result = await runBenchmark(benchmark, { dir: "/nonexistent", runs: 5, log: () => undefined })
    assert.deepStrictEqual(seen, [-1, 0, 1, 2, 3, 4])
    assert.isTrue(closed)
    assert.deepStrictEqual(result.medians, { slow: 4, fast: 1 })
    assert.strictEqual(result.ratio, 4)
    assert.isFalse(result.pass)
    assert.strictEqual(result.runs, 5)
    assert.include(terminalTable([result]), "MISSED")
    const machine = {
      date: "2026-11-30T00:00:00.000Z",
      os: "Linux",
      cpu: "cpu",
      cores: 2,
      memory_gib: 24,
      node: "v20",
      filesystem: "ext4",
      postgres: null,
      load_average: 1
    }
    const page = markdown({ machine, benchmarks: [result] }, "## How")
    assert.include(page, "| fake |")
    assert.include(page, "MISSED")
    assert.include(page, "- size: 3")
  })
})
