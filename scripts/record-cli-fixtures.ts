/**
 * Records what the real Claude Code and Codex CLIs (the pinned versions, installed by
 * scripts/install-agent-clis.sh) print in each situation RelayKeep must judge, run exactly as
 * the worker runs them, against the loopback stand-ins of test/support/modelApis.ts. Writes
 * fixtures/cli/<cli>/<situation>.json, and the login status the doctor reads into
 * fixtures/cli/status/; test/providers/cliFixtures.test.ts replays them through the adapters'
 * judges and the doctor's readers. After a CLI upgrade, re-record and read the diff:
 *
 *   bash scripts/install-agent-clis.sh && npx tsx scripts/record-cli-fixtures.ts
 *
 * Values that change on every run (ids, ports, timings) are replaced by fixed ones, so the
 * diff shows what the CLI changed, not what the clock did.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { claudeVersion, codexVersion, findAgentClis } from "../test/support/agentClis.js"
import type { CapturedRun, Situation } from "../test/support/agentRuns.js"
import { runLoginStatus, runRealClaude, runRealCodex } from "../test/support/agentRuns.js"

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

export const claudeSituations: Record<string, Situation> = {
  success: { scenario: "success" },
  dropped_stream: { scenario: "drop_once" },
  connection_lost: { scenario: "drop_always" },
  overloaded_529: { scenario: "overloaded" },
  rate_limited_429: { scenario: "rate_limited" },
  invalid_api_key_401: { scenario: "unauthorized" },
  not_logged_in: { scenario: "success", noCredentials: true },
  unknown_model_404: { scenario: "unknown_model" },
  stopped_while_streaming: { scenario: "hang", stopAfterMillis: 3000 }
}

export const codexSituations: Record<string, Situation> = {
  success: { scenario: "success" },
  reconnect_then_success: { scenario: "fail_once" },
  dropped_stream: { scenario: "drop_once" },
  connection_lost: { scenario: "drop_always" },
  overloaded_500: { scenario: "overloaded" },
  rate_limited_429: { scenario: "rate_limited" },
  invalid_api_key_401: { scenario: "unauthorized" },
  unknown_model_404: { scenario: "unknown_model" },
  outside_git_repository: { scenario: "success", outsideGit: true },
  missing_key_variable: { scenario: "success", missingKeyVariable: true },
  stopped_while_streaming: { scenario: "hang", stopAfterMillis: 3000 }
}

/** Fixed stand-ins for what differs between two runs of the same situation. */
export const normalize = (text: string): string =>
  text
    .replace(
      /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi,
      "00000000-0000-0000-0000-000000000000"
    )
    .replace(/127\.0\.0\.1:\d+/g, "127.0.0.1:PORT")
    .replace(/"([a-z_]*_ms)":\d+(\.\d+)?/g, '"$1":0')
    .replace(/\/tmp\/relaykeep-agent-[A-Za-z0-9]+/g, "/tmp/relaykeep-agent-XXXXXX")

const write = (cli: "claude" | "codex" | "status", version: string, name: string, run: CapturedRun) => {
  const folder = path.join(repo, "fixtures", "cli", cli)
  fs.mkdirSync(folder, { recursive: true })
  const fixture = {
    cli,
    version,
    situation: name,
    args: run.args,
    exit_code: run.exit_code,
    requests: run.requests,
    stdout: normalize(run.stdout),
    stderr: normalize(run.stderr)
  }
  fs.writeFileSync(path.join(folder, `${name}.json`), `${JSON.stringify(fixture, null, 2)}\n`)
  process.stderr.write(`${cli} ${name}: exit ${run.exit_code}, ${run.requests} requests\n`)
}

const main = async () => {
  const clis = findAgentClis()
  if (typeof clis === "string") {
    process.stderr.write(`${clis}\n`)
    process.exit(1)
  }
  for (const [name, situation] of Object.entries(claudeSituations))
    write("claude", claudeVersion, name, await runRealClaude(clis, situation))
  for (const [name, situation] of Object.entries(codexSituations))
    write("codex", codexVersion, name, await runRealCodex(clis, situation))
  // What `relaykeep doctor` reads: the CLIs' own login status, in fixtures/cli/status/.
  for (const state of ["logged_out", "api_key"] as const) {
    write("status", claudeVersion, `claude_${state}`, await runLoginStatus(clis, "claude", state))
    write("status", codexVersion, `codex_${state}`, await runLoginStatus(clis, "codex", state))
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  await main()
}
