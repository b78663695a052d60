/** Small example tools of every tier and outcome, and calling them through the pipeline in-process. */
import { Effect, Ref, Schema } from "effect"
import { AuditLog } from "../../src/services/AuditLog.js"
import type { AuditEntry } from "../../src/domain/audit.js"
import type { CallContext, ToolResult } from "../../src/mcp/pipeline.js"
import { callTool, inProcessContext, toolMap } from "../../src/mcp/pipeline.js"
import type { Tool } from "../../src/mcp/Tool.js"
import { defineTool } from "../../src/mcp/Tool.js"

export class Kaboom extends Schema.TaggedError<Kaboom>()("Kaboom", { detail: Schema.String }) {
  override get message() {
    return `it went off: ${this.detail}`
  }
}

export const TimeoutMillis = 50

/** Secret-bearing text a defect carries; it must never reach the client's answer. */
export const DefectSecret = "defect-detail-s3cr3t"

/**
 * One tool per tier and one per outcome. Each handler records its name in `ran`, so a test can
 * tell whether a handler was reached at all.
 */
export const exampleTools = (ran: Ref.Ref<ReadonlyArray<string>>): ReadonlyArray<Tool<never>> => {
  const mark = (name: string) => Ref.update(ran, (names) => [...names, name])
  return [
    defineTool({
      name: "look",
      description: "Read-only: counts the characters of a text.",
      input: Schema.Struct({ text: Schema.String, times: Schema.optional(Schema.Int) }),
      // NumberFromString makes the encoded answer differ from the decoded one.
      output: Schema.Struct({ length: Schema.NumberFromString, text: Schema.String }),
      tier: "read_only",
      handler: (input) =>
        Effect.as(mark("look"), { length: input.text.length * (input.times ?? 1), text: input.text })
    }),
    defineTool({
      name: "save",
      description: "Write: pretends to store a number.",
      input: Schema.Struct({ value: Schema.Number }),
      output: Schema.Struct({ saved: Schema.Number }),
      tier: "write",
      handler: (input) => Effect.as(mark("save"), { saved: input.value })
    }),
    ...["wipe", "shred"].map((name) =>
      defineTool({
        name,
        description: "Destructive: pretends to delete a target.",
        input: Schema.Struct({ target: Schema.String, api_key: Schema.optional(Schema.String) }),
        output: Schema.Struct({ deleted: Schema.String }),
        tier: "destructive",
        handler: (input) => Effect.as(mark(name), { deleted: input.target })
      })
    ),
    defineTool({
      name: "purge",
      description: "Destructive, without arguments: pretends to empty everything.",
      input: Schema.Struct({}),
      output: Schema.Struct({ purged: Schema.Boolean }),
      tier: "destructive",
      handler: () => Effect.as(mark("purge"), { purged: true })
    }),
    defineTool({
      name: "slow",
      description: "Sleeps far past its timeout.",
      input: Schema.Struct({}),
      output: Schema.Struct({ done: Schema.Boolean }),
      tier: "read_only",
      timeout: `${TimeoutMillis} millis`,
      handler: () => Effect.as(Effect.zipRight(mark("slow"), Effect.sleep("10 minutes")), { done: true })
    }),
    defineTool({
      name: "crash",
      description: "Dies with a defect.",
      input: Schema.Struct({}),
      output: Schema.Struct({ done: Schema.Boolean }),
      tier: "write",
      handler: () => Effect.zipRight(mark("crash"), Effect.die(new Error(DefectSecret)))
    }),
    defineTool({
      name: "fail",
      description: "Fails with a tagged error.",
      input: Schema.Struct({ detail: Schema.String }),
      output: Schema.Struct({ done: Schema.Boolean }),
      tier: "write",
      handler: (input) => Effect.zipRight(mark("fail"), new Kaboom({ detail: input.detail }))
    })
  ]
}

/** The example tools, with the record of which handlers ran. */
export const makeExampleTools = Effect.map(Ref.make<ReadonlyArray<string>>([]), (ran) => ({
  tools: toolMap(exampleTools(ran)),
  ran: Ref.get(ran)
}))

export const auditEntries = Effect.flatMap(AuditLog, (audit) => audit.list({}))

/**
 * Call a tool through the pipeline and return its result with the one audit entry it appended.
 * Dies (failing the test) unless the call appended exactly one entry.
 */
export const callAudited = <R>(
  tools: ReadonlyMap<string, Tool<R>>,
  name: string,
  args: unknown,
  context: CallContext = inProcessContext("test")
): Effect.Effect<{ readonly result: ToolResult; readonly entry: AuditEntry }, never, R | AuditLog> =>
  Effect.gen(function* () {
    const before = yield* Effect.orDie(auditEntries)
    const result = yield* callTool(tools, name, args, context)
    const after = yield* Effect.orDie(auditEntries)
    const entry = after[after.length - 1]
    if (after.length !== before.length + 1 || entry === undefined)
      return yield* Effect.dieMessage(`${name}: ${after.length - before.length} audit entries, expected 1`)
    return { result, entry }
  })

/** The text of a result's first content item. */
export const textOf = (result: ToolResult): string => result.content[0]?.text ?? ""
