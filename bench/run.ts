/**
 * `npm run bench [-- NAME… ] [--runs N]`: run the benchmarks, print the table, and write
 * bench/results/latest.json and docs/benchmarks.md. Running some benchmarks replaces their
 * entries and keeps the others from the last run. `--report` runs nothing: it writes
 * docs/benchmarks.md again from latest.json and bench/methods.md (after an edit of the methods).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import prettier from "prettier"
import { benchmarks } from "./benchmarks/index.js"
import type { BenchResult } from "./harness.js"
import { runBenchmark } from "./harness.js"
import { describeMachine, isMachine } from "./machine.js"
import { postgresVersion } from "./postgres.js"
import type { Results } from "./report.js"
import { markdown, terminalTable } from "./report.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const latestFile = path.join(repo, "bench", "results", "latest.json")
const docsFile = path.join(repo, "docs", "benchmarks.md")
const MinRuns = 5

const usage = (reason: string): never => {
  console.error(`bench: ${reason}`)
  console.error(`usage: npm run bench -- [NAME…] [--runs N (at least ${MinRuns})] | --report`)
  console.error(`benchmarks: ${benchmarks.map((benchmark) => benchmark.name).join(", ")}`)
  process.exit(2)
}

const parseArgs = (argv: ReadonlyArray<string>) => {
  const names: Array<string> = []
  let runs = MinRuns
  let reportOnly = false
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index] ?? ""
    if (arg === "--report") {
      reportOnly = true
    } else if (arg === "--runs") {
      runs = Number(argv[++index])
      if (!Number.isInteger(runs) || runs < MinRuns) usage(`--runs must be an integer of at least ${MinRuns}`)
    } else if (arg.startsWith("-")) {
      usage(`unknown option ${arg}`)
    } else if (!benchmarks.some((benchmark) => benchmark.name === arg)) {
      usage(`no benchmark named ${arg}`)
    } else {
      names.push(arg)
    }
  }
  if (reportOnly && names.length > 0) usage("--report runs nothing: name no benchmark with it")
  return { names, runs, reportOnly }
}

const previousResults = (): ReadonlyArray<BenchResult> => {
  try {
    const parsed: unknown = JSON.parse(readFileSync(latestFile, "utf8"))
    if (
      typeof parsed === "object" &&
      parsed !== null &&
      "benchmarks" in parsed &&
      Array.isArray(parsed.benchmarks)
    ) {
      return parsed.benchmarks
    }
  } catch {
    // No earlier run, or one this version cannot read: start afresh.
  }
  return []
}

/** latest.json and docs/benchmarks.md: these results, and the other benchmarks' last ones. */
const writeResults = async (
  scratch: string,
  fresh: ReadonlyArray<BenchResult>,
  machine?: Results["machine"]
) => {
  // Keep the other benchmarks' last results, in the registry's order.
  const byName = new Map([...previousResults(), ...fresh].map((result) => [result.name, result]))
  const results: Results = {
    machine: machine ?? describeMachine(scratch, await postgresVersion()),
    benchmarks: benchmarks.flatMap((benchmark) => byName.get(benchmark.name) ?? [])
  }
  mkdirSync(path.dirname(latestFile), { recursive: true })
  writeFileSync(latestFile, `${JSON.stringify(results, null, 2)}\n`)
  const methods = readFileSync(path.join(repo, "bench", "methods.md"), "utf8")
  // Formatted as the repository formats Markdown, so that `prettier --check` passes on it.
  const config = (await prettier.resolveConfig(docsFile)) ?? {}
  writeFileSync(
    docsFile,
    await prettier.format(markdown(results, methods), { ...config, filepath: docsFile })
  )
}

const main = async () => {
  const { names, runs, reportOnly } = parseArgs(process.argv.slice(2))
  if (reportOnly) {
    // The machine the results were taken on, not the one that writes the page.
    const latest: unknown = JSON.parse(readFileSync(latestFile, "utf8"))
    if (typeof latest !== "object" || latest === null || !("machine" in latest) || !isMachine(latest.machine))
      return usage(
        `--report: ${path.relative(repo, latestFile)} names no machine this version can read; run a benchmark`
      )
    await writeResults(os.tmpdir(), [], latest.machine)
    console.log(`wrote ${path.relative(repo, docsFile)} from ${path.relative(repo, latestFile)}`)
    return
  }
  const chosen =
    names.length === 0 ? benchmarks : benchmarks.filter((benchmark) => names.includes(benchmark.name))
  const scratch = process.env["RELAYKEEP_BENCH_DIR"] ?? os.tmpdir()
  mkdirSync(scratch, { recursive: true })

  const fresh: Array<BenchResult> = []
  let failed = false
  for (const benchmark of chosen) {
    const dir = mkdtempSync(path.join(scratch, `relaykeep-bench-${benchmark.name}-`))
    try {
      fresh.push(await runBenchmark(benchmark, { dir, runs, log: (line) => console.error(line) }))
      // Written after each benchmark, so that a later one that fails or is stopped loses nothing.
      await writeResults(scratch, fresh)
    } catch (error) {
      failed = true
      console.error(
        `${benchmark.name}: could not run: ${error instanceof Error ? error.stack : String(error)}`
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }

  console.log(terminalTable(fresh))
  console.log(`\nwrote ${path.relative(repo, latestFile)} and ${path.relative(repo, docsFile)}`)
  if (failed) process.exitCode = 1
}

await main()
