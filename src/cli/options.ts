/** Options every command shares, and the store each command runs on. */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import { Path } from "@effect/platform"
import { Config, Effect, Either, Layer, Option } from "effect"
import { parseDuration } from "../domain/duration.js"
import { InvalidInput } from "../domain/errors.js"
import { AuditLog } from "../mcp/AuditLog.js"
import { TaskStore } from "../services/TaskStore.js"

/** An environment variable that is set and not empty (read through Effect's Config). */
export const nonEmptyEnv = (name: string) =>
  Config.option(Config.nonEmptyString(name)).pipe(Effect.orElseSucceed(() => Option.none<string>()))

export const root = Options.text("root").pipe(
  Options.withDescription(
    "Data root (default: $RELAYKEEP_ROOT, else $XDG_DATA_HOME/relaykeep, else ~/.local/share/relaykeep)"
  ),
  Options.optional
)

/** `--root`, else RELAYKEEP_ROOT, else $XDG_DATA_HOME/relaykeep, else ~/.local/share/relaykeep. */
export const resolveRoot = (option: Option.Option<string>) =>
  Effect.gen(function* () {
    const path = yield* Path.Path
    if (Option.isSome(option)) return path.resolve(option.value)
    const env = nonEmptyEnv
    const explicit = yield* env("RELAYKEEP_ROOT")
    if (Option.isSome(explicit)) return path.resolve(explicit.value)
    const xdg = yield* env("XDG_DATA_HOME")
    if (Option.isSome(xdg)) return path.join(path.resolve(xdg.value), "relaykeep")
    const home = yield* env("HOME")
    if (Option.isSome(home)) return path.join(home.value, ".local", "share", "relaykeep")
    return yield* new InvalidInput({
      field: "--root",
      reason: "no --root, RELAYKEEP_ROOT, XDG_DATA_HOME or HOME"
    })
  })

/** The file store at the resolved root: what every queue command runs on. */
export const storeLayer = (option: Option.Option<string>) =>
  Layer.unwrapEffect(Effect.map(resolveRoot(option), (dir) => TaskStore.layer({ root: dir })))

/** A duration option (`90s`, `5m`, `2h`, or seconds), as milliseconds. */
export const duration = (name: string, fallback: string) =>
  Options.text(name).pipe(
    Options.withDefault(fallback),
    Options.mapEffect((text) =>
      Either.match(parseDuration(text), {
        onLeft: (reason) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${name}: ${reason}`))),
        onRight: Effect.succeed
      })
    )
  )

/** The audit log under the resolved root: `<root>/audit/`. */
export const auditLayer = (option: Option.Option<string>) =>
  Layer.unwrapEffect(Effect.map(resolveRoot(option), (dir) => AuditLog.layer(`${dir}/audit`)))
