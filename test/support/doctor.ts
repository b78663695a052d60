/**
 * What `relaykeep doctor --json` prints, as docs/providers.md documents it (kept apart from
 * src/providers/doctor.ts on purpose: a change to the schema must change this copy too), and
 * how a test reads a run of it.
 */
import { assert } from "@effect/vitest"
import { Schema } from "effect"
import type { RunResult } from "./cli.js"

export const DoctorCheck = Schema.Struct({
  check: Schema.Literal("executable", "version", "login", "work_dir", "git_repository", "server", "model"),
  ok: Schema.Boolean,
  detail: Schema.String
})
export type DoctorCheck = typeof DoctorCheck.Type

export const Diagnosis = Schema.Struct({
  provider: Schema.Literal("claude", "codex", "ollama", "openai"),
  configured: Schema.Boolean,
  ok: Schema.Boolean,
  target: Schema.NullOr(Schema.String),
  version: Schema.NullOr(Schema.String),
  work_dir: Schema.NullOr(Schema.String),
  models: Schema.Array(Schema.String),
  problem: Schema.NullOr(Schema.String),
  checks: Schema.Array(DoctorCheck)
})

export const DoctorOutput = Schema.Struct({
  ok: Schema.Boolean,
  work_dir: Schema.NullOr(Schema.String),
  providers: Schema.Array(Diagnosis)
})
export type DoctorOutput = typeof DoctorOutput.Type

/**
 * The report of a `doctor --json` run: exit 0 with nothing on stderr when every configured
 * provider is ready, else exit 1 with one `ProvidersNotReady: …` line naming them; the report
 * is on stdout either way.
 */
export const doctorReport = (result: RunResult): DoctorOutput => {
  const report = Schema.decodeUnknownSync(Schema.parseJson(DoctorOutput), { onExcessProperty: "error" })(
    result.stdout
  )
  const notReady = report.providers.filter((d) => d.configured && !d.ok).map((d) => d.provider)
  assert.strictEqual(report.ok, notReady.length === 0)
  if (report.ok) {
    assert.strictEqual(result.code, 0, result.stderr)
    assert.strictEqual(result.stderr, "")
  } else {
    assert.strictEqual(result.code, 1)
    assert.strictEqual(
      result.stderr,
      `ProvidersNotReady: not ready: ${notReady.join(", ")} (the report above says why)\n`
    )
  }
  return report
}
