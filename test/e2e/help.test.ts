/**
 * `--help` of every command of the built bins, read through a pipe as a script or a pager reads
 * it: no escape codes, usage lines that start with `relaykeep`, none of @effect/cli's sentences
 * about an option's type, and optional options (repeatable ones too) in brackets. On a terminal
 * (a pseudo-terminal made by script(1)) names are bold, unless NO_COLOR is set.
 */
import { assert, beforeAll, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as path from "node:path"
import { failureOutput, relaykeep, relaykeepBin, run } from "../support/cli.js"
import type { RunResult } from "../support/cli.js"
import { spawnEnv } from "../support/environment.js"

const bin = (name: string) => path.join(path.dirname(relaykeepBin), `${name}.js`)

/** The commands the root's help lists, e.g. `worker`, `audit list`. */
let commands: ReadonlyArray<string> = []

const section = (text: string, name: string): ReadonlyArray<string> => {
  const lines = text.split("\n")
  const start = lines.indexOf(name)
  if (start < 0) return []
  const end = lines.findIndex((line, i) => i > start && line === "")
  return lines.slice(start + 1, end < 0 ? undefined : end)
}

/** The usage, its wrapped lines joined. */
const usageOf = (text: string) =>
  section(text, "USAGE")
    .map((line) => line.trim())
    .join(" ")

/** What every help page must be, read through a pipe. */
const assertReadable = (result: RunResult, words: string) => {
  assert.strictEqual(result.code, 0, result.stderr)
  assert.strictEqual(result.stderr, "")
  assert.notInclude(result.stdout, "\u001b", "no escape code in a pipe")
  assert.notInclude(result.stdout, "A user-defined piece of text")
  assert.notInclude(result.stdout, "This setting is optional")
  assert.notInclude(result.stdout, "$ ")
  const usage = usageOf(result.stdout)
  assert.notInclude(usage, "[[", "one pair of brackets")
  assert.isTrue(usage.startsWith(`relaykeep ${words}`.trim()), `usage of ${words}: ${usage}`)
  // Each option listed without "(required)" is bracketed in the usage, and each required one is not.
  for (const line of section(result.stdout, "OPTIONS").filter((l) => /^ {2}--/.test(l))) {
    const flag = line.trim().split(/\s+/)[0] ?? ""
    if (line.includes("(required"))
      assert.match(usage, new RegExp(`(^|[ (])${flag}( |$)`), `${flag} is required in ${usage}`)
    else assert.match(usage, new RegExp(`\\[${flag}( [^\\]]*)?\\]`), `${flag} is optional in ${usage}`)
  }
}

describe("help of every command, through a pipe", { timeout: 180_000 }, () => {
  beforeAll(async () => {
    const root = await relaykeep(["--help"])
    assertReadable(root, "")
    commands = section(root.stdout, "COMMANDS")
      .filter((line) => /^ {2}\S/.test(line))
      .map((line) => line.trim().split(/\s{2,}/)[0] ?? "")
  })

  it("the root lists every command", () => {
    for (const name of ["submit", "read", "worker", "list", "tasks", "memory serve", "audit prune", "demo"])
      assert.include(commands, name)
  })

  it("each command's --help reads well", async () => {
    for (const words of commands) assertReadable(await relaykeep([...words.split(" "), "--help"]), words)
  })

  it("a help flag after other options shows the same help", async () => {
    assertReadable(await relaykeep(["list", "--root", "/nonexistent/relaykeep", "--help"]), "list")
    assertReadable(await relaykeep(["audit", "list", "--limit", "3", "-h"]), "audit list")
  })

  it("a command run without its subcommand shows its help", async () => {
    assertReadable(await relaykeep(["audit"]), "audit")
    assertReadable(await relaykeep([]), "")
  })

  it("the worker's repeatable and optional options are bracketed", async () => {
    const usage = usageOf((await relaykeep(["worker", "--help"])).stdout)
    assert.include(usage, "[--strip-env text]...")
    assert.include(usage, "[--allow-work-dir text]...")
    assert.include(usage, "[--log-format auto|text|json]")
    assert.include(usage, "[--root text]")
  })

  it("the other bins' help is their command's", async () => {
    assertReadable(await run(bin("relaykeep-worker"), ["--help"]), "worker")
    assertReadable(await run(bin("relaykeep-tasks"), ["--help"]), "tasks")
    assertReadable(await run(bin("relaykeep-memory"), ["--help"]), "memory serve")
  })
})

describe("a bad value the library refuses names the flag", { timeout: 60_000 }, () => {
  const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
    [
      ["worker", "--log-format", "xml"],
      "--log-format: Expected one of the following cases: auto, text, json"
    ],
    [["list", "--state=bogus"], "--state: Expected one of the following cases: queued,"],
    [["list", "--limit", "abc"], "--limit: 'abc' is not a integer"]
  ]
  it("a choice or a number", async () => {
    for (const [args, expected] of cases) {
      const result = await relaykeep([...args, "--root", "/nonexistent/relaykeep"])
      assert.include(failureOutput(result, 2, "UsageError"), expected)
    }
  })
})

/** script(1) runs a command on a pseudo-terminal: what a person at a terminal sees. */
const hasScript = spawnSync("script", ["--version"]).status === 0

describe.skipIf(!hasScript)("help on a terminal", { timeout: 60_000 }, () => {
  const onTerminal = (extra: Readonly<Record<string, string>>) => {
    // The test run's own NO_COLOR, if any, is not passed on: each test sets it or not.
    const { NO_COLOR: _, ...env } = spawnEnv()
    return spawnSync(
      "script",
      ["-qec", `"${process.execPath}" "${relaykeepBin}" worker --help`, "/dev/null"],
      {
        env: { ...env, ...extra },
        encoding: "utf8"
      }
    )
  }

  it("is bold on a terminal", () => {
    const result = onTerminal({})
    assert.strictEqual(result.status, 0, result.stderr)
    assert.include(result.stdout, "\u001b[1mUSAGE\u001b[0m")
  })

  it("has no escape code with NO_COLOR set", () => {
    const result = onTerminal({ NO_COLOR: "1" })
    assert.strictEqual(result.status, 0, result.stderr)
    assert.include(result.stdout, "USAGE")
    assert.notInclude(result.stdout, "\u001b")
  })
})
