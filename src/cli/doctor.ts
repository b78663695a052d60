import { Command, Options } from "@effect/cli"
import { Console, Effect } from "effect"
import type { Diagnosis } from "../providers/doctor.js"
import { diagnose } from "../providers/doctor.js"
import { resolveRoot, root } from "./options.js"
import { printJson } from "./output.js"
import { httpClientLayer, providerOptions, resolveProviderSettings } from "./providerOptions.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON instead of a table"))

const row = (cells: ReadonlyArray<string>, widths: ReadonlyArray<number>) =>
  cells
    .map((cell, i) => cell.padEnd(widths[i] ?? 0))
    .join("  ")
    .trimEnd()

/** A plain table: provider, status, what is checked, and the detail that matters. */
export const renderTable = (diagnoses: ReadonlyArray<Diagnosis>): string => {
  const rows = diagnoses.map((d) => [
    d.provider,
    d.ok ? "ok" : d.configured ? "FAIL" : "off",
    d.target ?? "-",
    d.ok
      ? (d.version ?? (d.models.length > 0 ? `models: ${d.models.join(", ")}` : "no models"))
      : (d.problem ?? "")
  ])
  const header = ["provider", "status", "executable / url", "detail"]
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  return [row(header, widths), ...rows.map((r) => row(r, widths))].join("\n")
}

export const doctor = Command.make("doctor", { root, json, ...providerOptions }, (args) =>
  Effect.gen(function* () {
    const settings = yield* resolveProviderSettings(args, yield* resolveRoot(args.root))
    const diagnoses = yield* diagnose(settings)
    if (args.json) return yield* printJson({ work_dir: settings.workDir ?? null, providers: diagnoses })
    yield* Console.log(renderTable(diagnoses))
    yield* Console.log(`work dir: ${settings.workDir ?? "(none)"}`)
  })
).pipe(
  Command.withDescription("Check each configured provider without spending a model call."),
  Command.provide(httpClientLayer)
)
