import { Command, Options } from "@effect/cli"
import { Effect, Option } from "effect"
import { TaskState } from "../domain/Task.js"
import { TaskStore } from "../services/TaskStore.js"
import { MaxListLimit } from "../store/shared.js"
import { printJson } from "./output.js"
import { integerBetween, storeLayer, storeOptions } from "./options.js"

const state = Options.choice("state", TaskState.literals).pipe(
  Options.withDescription("Only tasks in this state"),
  Options.optional
)
// The same bounds as the MCP list tool: 0 or 501 is refused, never clamped.
const limit = integerBetween("limit", 1, MaxListLimit).pipe(
  Options.withDescription(`At most this many tasks (1-${MaxListLimit}, default 50)`),
  Options.optional
)
const provider = Options.text("provider").pipe(
  Options.withDescription("Only tasks this provider runs (fake-echo: payloads that name none)"),
  Options.optional
)
const search = Options.text("search").pipe(
  Options.withDescription("Only tasks whose request id or task id contains this text (any case)"),
  Options.optional
)
const cursor = Options.text("cursor").pipe(
  Options.withDescription("next_cursor of the previous page"),
  Options.optional
)

export const list = Command.make(
  "list",
  { ...storeOptions, state, provider, search, limit, cursor },
  (args) =>
    Effect.gen(function* () {
      const store = yield* TaskStore
      yield* printJson(
        yield* store.list({
          state: Option.getOrUndefined(args.state),
          provider: Option.getOrUndefined(args.provider),
          search: Option.getOrUndefined(args.search),
          limit: Option.getOrUndefined(args.limit),
          cursor: Option.getOrUndefined(args.cursor)
        })
      )
    })
).pipe(
  Command.withDescription("List tasks, newest first."),
  Command.provide((args) => storeLayer(args))
)
