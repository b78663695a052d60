/** The results as a terminal table, as `bench/results/latest.json`, and as `docs/benchmarks.md`. */
import type { BenchResult } from "./harness.js"
import type { Machine } from "./machine.js"

export interface Results {
  readonly machine: Machine
  readonly benchmarks: ReadonlyArray<BenchResult>
}

const verdictOf = (result: BenchResult) => (result.pass === null ? "report" : result.pass ? "pass" : "MISSED")

const figuresOf = (result: BenchResult) =>
  Object.entries(result.medians)
    .map(([series, value]) => `${series} ${value}`)
    .join(", ")

const rows = (results: ReadonlyArray<BenchResult>) =>
  results.map((result) => [
    result.name,
    `${figuresOf(result)} ${result.unit}`,
    result.ratio === null ? "–" : `${result.ratio}×`,
    result.target,
    verdictOf(result),
    String(result.runs)
  ])

const Header = ["benchmark", "medians", "ratio", "target", "verdict", "runs"]

export const terminalTable = (results: ReadonlyArray<BenchResult>): string => {
  const table = [Header, ...rows(results)]
  const widths = Header.map((_, column) => Math.max(...table.map((row) => (row[column] ?? "").length)))
  return table.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join("  ")).join("\n")
}

const cell = (text: string) => text.replace(/\|/g, "\\|")

const markdownTable = (results: ReadonlyArray<BenchResult>) =>
  [
    `| ${Header.join(" | ")} |`,
    `| ${Header.map(() => "---").join(" | ")} |`,
    ...rows(results).map((row) => `| ${row.map(cell).join(" | ")} |`)
  ].join("\n")

const detailsOf = (result: BenchResult) => {
  const entries = Object.entries(result.details)
  if (entries.length === 0) return ""
  return entries
    .map(([key, value]) => `- ${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`)
    .join("\n")
}

/** `docs/benchmarks.md`: written by `npm run bench`, never by hand. */
export const markdown = ({ benchmarks, machine }: Results, methods: string): string =>
  [
    "# Benchmarks",
    "",
    "<!-- Written by `npm run bench` from bench/results/latest.json. Edit bench/, not this file. -->",
    "",
    `Last run: ${machine.date}.`,
    "",
    markdownTable(benchmarks),
    "",
    "## The machine",
    "",
    `- ${machine.os}; ${machine.cpu}, ${machine.cores} cores, ${machine.memory_gib} GiB`,
    `- Node ${machine.node}; benchmark files on ${machine.filesystem}`,
    `- PostgreSQL: ${machine.postgres ?? "not reached"}`,
    `- Load average when written: ${machine.load_average} (on ${machine.cores} cores; figures taken on a busy machine are noisy)`,
    "",
    methods.trim(),
    "",
    "## Each benchmark",
    "",
    ...benchmarks.flatMap((result) => [
      `### ${result.name}`,
      "",
      `${result.title} Baseline: ${result.baseline}. Target: ${result.target}; ${verdictOf(result)}.`,
      "",
      detailsOf(result),
      ""
    ])
  ]
    .join("\n")
    .replace(/\n{3,}/g, "\n\n")
