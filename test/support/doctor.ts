/** What `relaykeep doctor --json` prints: the work dir and one diagnosis per provider. */
import { Schema } from "effect"

export const Diagnosis = Schema.Struct({
  provider: Schema.Literal("claude", "codex", "ollama", "openai"),
  configured: Schema.Boolean,
  ok: Schema.Boolean,
  target: Schema.NullOr(Schema.String),
  version: Schema.NullOr(Schema.String),
  work_dir: Schema.NullOr(Schema.String),
  models: Schema.Array(Schema.String),
  problem: Schema.NullOr(Schema.String)
})

export const DoctorOutput = Schema.Struct({
  work_dir: Schema.NullOr(Schema.String),
  providers: Schema.Array(Diagnosis)
})
