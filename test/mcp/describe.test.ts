/**
 * What clients are told: each tool's tools/list entry (hints from its tier, JSON Schemas from its
 * Effect Schemas), each server's instructions, and the two servers' independence.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Ref, Schema } from "effect"
import { MemoryInstructions } from "../../src/mcp/memory/server.js"
import { memoryTools } from "../../src/mcp/memory/tools.js"
import { describeTool } from "../../src/mcp/server.js"
import { TasksInstructions } from "../../src/mcp/tasks/server.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"
import type { Tool } from "../../src/mcp/Tool.js"
import { defineTool } from "../../src/mcp/Tool.js"
import { exampleTools } from "./inProcess.js"

const hintsOf = <R>(tool: Tool<R>) => describeTool(tool).annotations

describe("describeTool", () => {
  it.effect("annotations follow the tier", () =>
    Effect.gen(function* () {
      const byName = new Map(exampleTools(yield* Ref.make<ReadonlyArray<string>>([])).map((t) => [t.name, t]))
      const hints = (name: string) => {
        const tool = byName.get(name)
        assert.isDefined(tool, name)
        return tool === undefined ? undefined : hintsOf(tool)
      }
      const readOnly = {
        readOnlyHint: true,
        destructiveHint: false,
        idempotentHint: true,
        openWorldHint: false
      }
      const write = {
        readOnlyHint: false,
        destructiveHint: false,
        idempotentHint: false,
        openWorldHint: false
      }
      const destructive = {
        readOnlyHint: false,
        destructiveHint: true,
        idempotentHint: false,
        openWorldHint: false
      }
      assert.deepStrictEqual(hints("look"), readOnly)
      assert.deepStrictEqual(hints("save"), write)
      assert.deepStrictEqual(hints("wipe"), destructive)
    })
  )

  it("explicit idempotent and openWorld override the tier's defaults", () => {
    const tool = defineTool({
      name: "fetch",
      description: "Reaches the network.",
      input: Schema.Struct({ url: Schema.String }),
      output: Schema.Struct({ ok: Schema.Boolean }),
      tier: "read_only",
      idempotent: false,
      openWorld: true,
      handler: () => Effect.succeed({ ok: true })
    })
    assert.deepStrictEqual(hintsOf(tool), {
      readOnlyHint: true,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: true
    })
  })

  const servers: ReadonlyArray<readonly [string, ReadonlyArray<Tool<unknown>>]> = [
    ["tasks", taskTools],
    ["memory", memoryTools]
  ]
  for (const [server, tools] of servers) {
    for (const tool of tools) {
      it(`${server}.${tool.name}: schemas are plain objects without $schema, closed to extra keys`, () => {
        const described = describeTool(tool)
        for (const schema of [described.inputSchema, described.outputSchema]) {
          assert.notProperty(schema, "$schema")
          assert.strictEqual(schema.type, "object")
        }
        const input = described.inputSchema
        assert.strictEqual("additionalProperties" in input ? input.additionalProperties : undefined, false)
        assert.isObject("properties" in input ? input.properties : undefined)
        assert.isAbove(described.description.length, 0)
        assert.isFalse(described.annotations.destructiveHint, "neither server has destructive tools")
        assert.isFalse(described.annotations.openWorldHint)
      })
    }
  }

  it("the tiers of the real tools are as documented", () => {
    const tiers = (tools: ReadonlyArray<Tool<unknown>>) => tools.map((tool) => [tool.name, tool.tier])
    assert.deepStrictEqual(tiers(taskTools), [
      ["submit", "write"],
      ["read", "read_only"],
      ["cancel", "write"],
      ["list", "read_only"],
      ["broadcast", "write"],
      ["read_group", "read_only"]
    ])
    assert.deepStrictEqual(tiers(memoryTools), [
      ["search", "read_only"],
      ["read", "read_only"]
    ])
  })
})

describe("servers", () => {
  it("instructions are under 512 characters", () => {
    for (const text of [TasksInstructions, MemoryInstructions]) {
      assert.isAbove(text.length, 0)
      assert.isBelow(text.length, 512)
    }
  })

  /** Every source file reachable from `entry` through relative imports. */
  const reachable = (entry: string) =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const seen = new Set<string>()
      const pending = [path.resolve(entry)]
      for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
        if (seen.has(file)) continue
        seen.add(file)
        const text = yield* fs.readFileString(file)
        const specifiers = text.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*)["']([^"']+)["']/g)
        for (const [, specifier] of specifiers) {
          if (specifier === undefined || !specifier.startsWith(".")) continue
          pending.push(path.resolve(path.dirname(file), specifier.replace(/\.js$/, ".ts")))
        }
      }
      return [...seen]
    })

  const sourcesOf = (dir: string) =>
    Effect.gen(function* () {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const names = yield* fs.readDirectory(dir)
      return names.filter((name) => name.endsWith(".ts")).map((name) => path.resolve(dir, name))
    })

  it.effect("src/mcp/tasks and src/mcp/memory do not import each other, even indirectly", () =>
    Effect.gen(function* () {
      const path = yield* Path.Path
      const pairs = [
        ["src/mcp/tasks", "src/mcp/memory"],
        ["src/mcp/memory", "src/mcp/tasks"]
      ] as const
      for (const [from, forbidden] of pairs) {
        const entries = yield* sourcesOf(from)
        assert.isAbove(entries.length, 0, from)
        const forbiddenDir = path.resolve(forbidden) + path.sep
        for (const entry of entries) {
          const files = yield* reachable(entry)
          assert.isAbove(files.length, 1, `${entry} imports something`)
          const leaks = files.filter((file) => file.startsWith(forbiddenDir))
          assert.deepStrictEqual(leaks, [], `${entry} reaches ${forbidden}`)
        }
      }
    }).pipe(Effect.provide(nodeContextLayer))
  )
})
