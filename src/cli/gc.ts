import { Command, Options } from "@effect/cli"
import { Clock, Console, Effect, Option } from "effect"
import { BareNumberReason, isBareNumber, sinceMillisAt } from "../domain/duration.js"
import { InvalidInput } from "../domain/errors.js"
import type { CollectedTask } from "../domain/retention.js"
import { isoTime } from "../domain/time.js"
import type { CollectReport } from "../services/TaskStore.js"
import { TaskStore } from "../services/TaskStore.js"
import { integerBetween, storeLayer, storeOptions } from "./options.js"
import { printJson } from "./output.js"

const finishedBefore = Options.text("finished-before").pipe(
  Options.withDescription(
    "Remove tasks that finished longer ago than this (30d, 12h) or before this time (2026-11-30)"
  )
)
const keepLast = integerBetween("keep-last", 0, 1_000_000_000).pipe(
  Options.withDescription("Keep the newest N finished tasks however old they are"),
  Options.optional
)
const dryRun = Options.boolean("dry-run").pipe(
  Options.withDescription("Print what would be removed, and remove nothing")
)
const json = Options.boolean("json").pipe(
  Options.withDescription("Print one JSON document instead of a line per task and a summary")
)

const taskLine = (verb: string, task: CollectedTask) =>
  `${verb} ${task.task_id} ${task.state} finished ${task.finished_at} request ${JSON.stringify(task.client_request_id)}`

/** A line per task, a line per damaged record, and the summary. */
export const describeCollection = (report: CollectReport, cutoff: string): ReadonlyArray<string> => {
  const verb = report.dry_run ? "would remove" : "removed"
  const count = report.removed.length
  return [
    ...report.removed.map((task) => taskLine(verb, task)),
    ...report.invalid.map((damaged) => `kept damaged ${damaged.file}: ${damaged.reason}`),
    `${verb} ${count} finished task${count === 1 ? "" : "s"} that finished before ${cutoff}` +
      (report.invalid.length === 0
        ? ""
        : `; kept ${report.invalid.length} damaged record${report.invalid.length === 1 ? "" : "s"} (relaykeep check)`)
  ]
}

export const gc = Command.make("gc", { ...storeOptions, finishedBefore, keepLast, dryRun, json }, (args) =>
  Effect.gen(function* () {
    // Checked before the store is opened: a bad flag touches nothing.
    if (isBareNumber(args.finishedBefore))
      return yield* new InvalidInput({ field: "--finished-before", reason: BareNumberReason })
    const cutoff = yield* sinceMillisAt(
      args.finishedBefore,
      yield* Clock.currentTimeMillis,
      "--finished-before"
    )
    const store = yield* TaskStore
    const report = yield* store.collect({
      finishedBefore: cutoff,
      keepLast: Option.getOrUndefined(args.keepLast),
      dryRun: args.dryRun
    })
    if (args.json)
      return yield* printJson({
        finished_before: isoTime(cutoff),
        keep_last: Option.getOrNull(args.keepLast),
        ...report
      })
    for (const line of describeCollection(report, isoTime(cutoff))) yield* Console.log(line)
  })
).pipe(
  Command.withDescription(
    "Remove finished tasks (complete, failed, cancelled) and their index entries: those that finished before --finished-before, but the newest --keep-last. Queued and running tasks, damaged records and tasks an MCP ttl still holds are kept."
  ),
  Command.provide((args) => storeLayer(args))
)
