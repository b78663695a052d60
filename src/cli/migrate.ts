/**
 * `relaykeep migrate --from DIR --to postgres://…`: move a file store's tasks into a
 * PostgreSQL queue, with their states, attempts and receipts, and check the copy.
 */
import { Command, Options } from "@effect/cli"
import * as Path from "@effect/platform/Path"
import { Effect } from "effect"
import { InvalidInput } from "../domain/errors.js"
import { readFileStore } from "../store/file/scan.js"
import { printJson } from "./output.js"
import { pgOptions, resolvePg } from "./options.js"

const from = Options.text("from").pipe(Options.withDescription("The file store's data root to copy from"))
const to = Options.text("to").pipe(Options.withDescription("The PostgreSQL store to copy into: postgres://…"))

/** At most this many damaged or running tasks are named in a refusal; the rest are counted. */
const Named = 5

const named = (items: ReadonlyArray<string>) =>
  items.length <= Named
    ? items.join("; ")
    : `${items.slice(0, Named).join("; ")}; and ${items.length - Named} more`

export const migrate = Command.make("migrate", { from, to, ...pgOptions }, (args) =>
  Effect.gen(function* () {
    const { options, target } = yield* resolvePg(args.to, "--to", args)
    const path = yield* Path.Path
    const source = yield* readFileStore(path.resolve(args.from))
    // Nothing is copied from a store that is damaged or still at work: the copy would not be whole.
    if (source.invalid.length > 0)
      return yield* new InvalidInput({
        field: "--from",
        reason: `${source.invalid.length} damaged record(s), nothing copied (see relaykeep check): ${named(source.invalid.map((r) => `${r.file}: ${r.reason}`))}`
      })
    const running = source.records.filter((record) => record.state === "running")
    if (running.length > 0)
      return yield* new InvalidInput({
        field: "--from",
        reason: `${running.length} task(s) still running, nothing copied: stop the workers first (they give their tasks back), or run relaykeep recover if they died: ${named(running.map((r) => r.task_id))}`
      })
    const { importRecords } = yield* Effect.promise(() => import("../store/postgres/importer.js"))
    const report = yield* Effect.scoped(
      importRecords(target, source.secret, source.records, { maxConnections: options.maxConnections })
    )
    yield* printJson({ from: path.resolve(args.from), to: target.display, ...report })
  })
).pipe(
  Command.withDescription(
    "Copy every task of a file store into a PostgreSQL queue, with states, attempts and receipts, then check the copy by count and hash."
  )
)
