/**
 * Help rendered from @effect/cli's documents: what the library says about each type is gone,
 * optional options are bracketed (repeatable ones too), required ones are marked, and there are
 * escape codes only when asked for.
 */
import { CliConfig, Command, CommandDescriptor, Options } from "@effect/cli"
import { assert, describe, it } from "@effect/vitest"
import { Config, Effect } from "effect"
import { renderHelp } from "../../src/cli/help.js"
import { integerBetween } from "../../src/cli/options.js"

const config = CliConfig.make({ showBuiltIns: false })

const sample = Command.make(
  "sample",
  {
    id: Options.text("id").pipe(Options.withDescription("Your request id")),
    note: Options.text("note").pipe(Options.withDescription("A note"), Options.optional),
    which: Options.orElse(Options.text("task-id"), Options.text("group")),
    home: Options.text("home").pipe(
      Options.withFallbackConfig(Config.string("HOME")),
      Options.withDescription("Home (default: $HOME)"),
      Options.optional
    ),
    strip: Options.text("strip-env").pipe(Options.withDescription("Remove a variable"), Options.repeated),
    format: Options.choice("format", ["text", "json"]).pipe(Options.withDefault("text")),
    limit: integerBetween("limit", 1, 9).pipe(Options.withDescription("At most this many"), Options.optional)
  },
  () => Effect.void
).pipe(Command.withDescription("Does a sample thing, and explains it at some length so that it wraps."))

const page = (colour: boolean) =>
  renderHelp(
    {
      title: "relaykeep 1.2.3",
      parents: ["relaykeep"],
      usage: CommandDescriptor.getUsage(sample.descriptor),
      doc: CommandDescriptor.getHelp(sample.descriptor, config)
    },
    { colour, width: 60 }
  )

describe("renderHelp", () => {
  it("starts the usage with the program's name and brackets what may be left out", () => {
    const text = page(false)
    const usage = text.split("\n\n")[1] ?? ""
    assert.match(usage, /^USAGE\n {2}relaykeep sample --id text \[--note text\]/)
    assert.include(usage, "[--strip-env text]...")
    assert.include(usage, "[--format text|json]")
    assert.include(usage, "[--limit integer]")
    assert.match(usage, /\s\[--home text\]\s/)
    assert.notInclude(usage, "[[")
    assert.include(usage, "(--task-id text | --group text)")
    for (const line of text.split("\n")) assert.isAtMost(line.length, 60, line)
  })

  it("leaves out the library's sentences and marks required and repeatable options", () => {
    const text = page(false)
    for (const boilerplate of [
      "A user-defined piece of text",
      "An integer.",
      "This setting is optional",
      "One of"
    ])
      assert.notInclude(text, boilerplate)
    assert.include(text, "  --id text  (required)\n      Your request id")
    assert.include(text, "  --strip-env text  (repeatable)\n      Remove a variable")
    assert.include(text, "  --note text\n      A note")
    assert.include(text, "  --task-id text  (required, or --group)")
  })

  it("has escape codes only when colour is asked for", () => {
    assert.notInclude(page(false), "\u001b")
    assert.include(page(true), "\u001b[1mUSAGE\u001b[0m")
  })
})
