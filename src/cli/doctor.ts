import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import { ProvidersNotReady } from "../domain/errors.js"
import type { Diagnosis } from "../providers/doctor.js"
import { diagnose } from "../providers/doctor.js"
import { resolveRoot, root } from "./options.js"
import { printJson } from "./output.js"
import { resolveProviderSettings } from "../providers/config.js"
import { httpClientLayer, providerOptions } from "./providerOptions.js"

const json = Options.boolean("json").pipe(
  Options.withDescription("Print the report as JSON (schema: docs/providers.md#relaykeep-doctor)")
)
const models = (provider: "codex" | "ollama" | "openai") =>
  Options.text(`${provider}-model`).pipe(
    Options.withDescription(
      `A model tasks will ask ${provider} for: its server on this machine must list it (repeatable)`
    ),
    Options.repeated
  )

const row = (cells: ReadonlyArray<string>, widths: ReadonlyArray<number>) =>
  cells
    .map((cell, i) => cell.padEnd(widths[i] ?? 0))
    .join("  ")
    .trimEnd()

/** What a ready provider's row says: its version (or models) and its login. */
const readyDetail = (d: Diagnosis): string => {
  const login = d.checks.find((c) => c.check === "login")?.detail
  const what = d.version ?? (d.models.length > 0 ? `models: ${d.models.join(", ")}` : "no models")
  return login === undefined ? what : `${what}; ${login}`
}

/** A plain table: provider, status, what is checked, and the detail that matters. */
export const renderTable = (diagnoses: ReadonlyArray<Diagnosis>): string => {
  const rows = diagnoses.map((d) => [
    d.provider,
    d.ok ? "ok" : d.configured ? "FAIL" : "off",
    d.target ?? "-",
    d.ok ? readyDetail(d) : (d.problem ?? "")
  ])
  const header = ["provider", "status", "executable / url", "detail"]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  return [row(header, widths), ...rows.map((r) => row(r, widths))].join("\n")
}

export const doctor = Command.make(
  "doctor",
  {
    root,
    json,
    codexModels: models("codex"),
    ollamaModels: models("ollama"),
    openaiModels: models("openai"),
    ...providerOptions
  },
  (args) =>
    Effect.gen(function* () {
      const settings = yield* resolveProviderSettings(args, yield* resolveRoot(args.root))
      const report = yield* diagnose(settings, {
        codexModels: args.codexModels,
        ollamaModels: args.ollamaModels,
        openaiModels: args.openaiModels
      })
      if (args.json) yield* printJson(report)
      else {
        yield* Console.log(renderTable(report.providers))
        yield* Console.log(`work dir: ${settings.workDir ?? "(none)"}`)
      }
      // The report is printed either way; the exit code says whether every configured provider is ready.
      if (!report.ok)
        return yield* new ProvidersNotReady({
          providers: report.providers.filter((d) => d.configured && !d.ok).map((d) => d.provider)
        })
    })
).pipe(
  Command.withDescription(
    "Check that a task could run now on each configured provider, without spending a model call. Exits 1 when one is not ready."
  ),
  Command.provide(httpClientLayer)
)
