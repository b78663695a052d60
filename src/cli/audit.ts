import { Command, Options } from "@effect/cli"
import { Clock, Effect, Either, Option, Schema } from "effect"
import { parseDuration, sinceMillisAt } from "../domain/duration.js"
import { InvalidInput } from "../domain/errors.js"
import { AuditStatus } from "../domain/audit.js"
import { AuditLog } from "../services/AuditLog.js"
import type { PruneRule } from "../domain/audit.js"
import { printJson } from "./output.js"
import { auditLayer, root } from "./options.js"

const status = Options.choice("status", AuditStatus.literals).pipe(
  Options.withDescription("Only entries with this outcome"),
  Options.optional
)
const tool = Options.text("tool").pipe(
  Options.withDescription("Only calls of this tool, by name"),
  Options.optional
)
const since = Options.text("since").pipe(
  Options.withDescription(
    "Entries since a time (2026-11-30, 2026-11-30T08:00:00Z) or a duration ago (24h, 7d)"
  ),
  Options.optional
)
const limit = Options.integer("limit").pipe(
  Options.withSchema(Schema.Int.pipe(Schema.positive({ message: () => "--limit: must be above 0" }))),
  Options.withDescription("At most this many, the newest"),
  Options.optional
)

/** `--since`: an ISO date/time, or a duration meaning that long ago. */
const sinceMillis = (text: string) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => sinceMillisAt(text, now, "--since"))

const list = Command.make("list", { root, status, tool, since, limit }, (args) =>
  Effect.gen(function* () {
    const audit = yield* AuditLog
    const from = Option.isSome(args.since) ? yield* sinceMillis(args.since.value) : undefined
    const entries = yield* audit.list({
      status: Option.getOrUndefined(args.status),
      tool: Option.getOrUndefined(args.tool),
      sinceMillis: from,
      limit: Option.getOrUndefined(args.limit)
    })
    yield* printJson({ entries })
  })
).pipe(
  Command.withDescription("Print audited tool calls, oldest first."),
  Command.provide((args) => auditLayer(args.root))
)

const keepLast = Options.integer("keep-last").pipe(
  Options.withSchema(
    Schema.Int.pipe(Schema.nonNegative({ message: () => "--keep-last: must not be negative" }))
  ),
  Options.withDescription("Keep this many entries, the newest, and remove the rest"),
  Options.optional
)
const olderThan = Options.text("older-than").pipe(
  Options.withDescription("Remove entries older than this (e.g. 30d)"),
  Options.optional
)

const ruleOf = (
  keep: Option.Option<number>,
  older: Option.Option<string>
): Either.Either<PruneRule, InvalidInput> => {
  if (Option.isSome(keep) === Option.isSome(older))
    return Either.left(
      new InvalidInput({ field: "--keep-last", reason: "give exactly one of --keep-last or --older-than" })
    )
  if (Option.isSome(keep)) return Either.right({ keepLast: keep.value })
  return Either.match(parseDuration(Option.getOrElse(older, () => "")), {
    onLeft: (reason) => Either.left(new InvalidInput({ field: "--older-than", reason })),
    onRight: (millis) => Either.right({ olderThanMillis: millis })
  })
}

const prune = Command.make("prune", { root, keepLast, olderThan }, (args) =>
  Effect.gen(function* () {
    const rule = yield* ruleOf(args.keepLast, args.olderThan)
    const audit = yield* AuditLog
    yield* printJson(yield* audit.prune(rule))
  })
).pipe(
  Command.withDescription("Remove old audit entries: --keep-last N or --older-than 30d."),
  Command.provide((args) => auditLayer(args.root))
)

export const audit = Command.make("audit").pipe(
  Command.withDescription("The audit log of MCP tool calls."),
  Command.withSubcommands([list, prune])
)
