/**
 * The JSON Schemas both servers advertise in tools/list, checked as clients use them: they
 * compile in strict Ajv (the validator of the MCP SDK's client), they carry no internal
 * annotation as a title and no `$ref`, every integer and number is typed inline with its
 * bounds, every field is described, and defaults are advertised. A snapshot of all of them is
 * committed, so a change to what clients see shows up in review.
 */
import { assert, describe, expect, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { Effect, FastCheck as fc, Predicate } from "effect"
import { memoryTools } from "../../src/mcp/memory/tools.js"
import { describeTool } from "../../src/mcp/server.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"
import type { Tool } from "../../src/mcp/Tool.js"
import { tools as argumentTable } from "./toolArguments.js"

const servers: ReadonlyArray<readonly ["tasks" | "memory", ReadonlyArray<Tool<unknown>>]> = [
  ["tasks", taskTools],
  ["memory", memoryTools]
]
const described = servers.flatMap(([server, tools]) =>
  tools.map((tool) => ({ server, tool, entry: describeTool(tool) }))
)

type Node = Readonly<Record<string, unknown>>

/** Every schema node of a JSON Schema, with its path, walking the keywords that hold schemas. */
const nodesOf = (schema: unknown, path = "#"): ReadonlyArray<readonly [string, Node]> => {
  if (!Predicate.isRecord(schema)) return []
  const nested: Array<readonly [string, Node]> = [[path, schema]]
  const sub = (value: unknown, at: string) => nested.push(...nodesOf(value, at))
  for (const [keyword, value] of Object.entries(schema)) {
    if (keyword === "properties" || keyword === "patternProperties" || keyword === "$defs") {
      if (Predicate.isRecord(value))
        for (const [name, member] of Object.entries(value)) sub(member, `${path}/${keyword}/${name}`)
    } else if (keyword === "anyOf" || keyword === "allOf" || keyword === "oneOf" || keyword === "items") {
      if (Array.isArray(value)) value.forEach((member, i) => sub(member, `${path}/${keyword}/${i}`))
      else sub(value, `${path}/${keyword}`)
    } else if (keyword === "additionalProperties" || keyword === "not" || keyword === "propertyNames") {
      sub(value, `${path}/${keyword}`)
    }
  }
  return nested
}

/**
 * Titles Effect derives from its own annotations: a filter's `name(args)` (`maxLength(200)`,
 * `between(0, 60)`), a keyword or filter name (`int`, `unknown`, `positive`) or an identifier
 * (`JsonObject`, `Int`). A title we set ourselves would be words with spaces.
 */
const InternalTitle = /^(?:[a-z][A-Za-z]*(?:\(.*\))?|[A-Z][A-Za-z0-9]*)$/

const NumericKeywords = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]
/** What a node without `type`, `anyOf` or `enum` may hold: it accepts any JSON value. */
const AnyValueKeywords = new Set(["description", "default"])

const problemsOf = (schema: unknown): ReadonlyArray<string> =>
  nodesOf(schema).flatMap(([path, node]) => {
    const problems: Array<string> = []
    const title = node["title"]
    if (typeof title === "string" && InternalTitle.test(title))
      problems.push(`${path}: internal title ${title}`)
    for (const keyword of ["$ref", "$defs", "$id", "$schema", "allOf"])
      if (keyword in node) problems.push(`${path}: has ${keyword}`)
    if (
      NumericKeywords.some((keyword) => keyword in node) &&
      !["integer", "number"].includes(String(node["type"]))
    )
      problems.push(`${path}: numeric bounds without "type": "integer" or "number"`)
    if (!("type" in node) && !("anyOf" in node) && !("enum" in node)) {
      const extra = Object.keys(node).filter((keyword) => !AnyValueKeywords.has(keyword))
      if (extra.length > 0) problems.push(`${path}: untyped node with ${extra.join(", ")}`)
    }
    const properties = node["properties"]
    if (Predicate.isRecord(properties))
      for (const [name, property] of Object.entries(properties)) {
        const description = Predicate.isRecord(property) ? property["description"] : undefined
        if (typeof description !== "string" || description.length < 10)
          problems.push(`${path}/properties/${name}: no description`)
      }
    return problems
  })

describe("advertised JSON Schemas", () => {
  for (const { server, entry } of described) {
    const name = `${server}.${entry.name}`

    it(`${name}: input and output schemas compile in strict Ajv`, () => {
      const ajv = new Ajv({ strict: true })
      assert.doesNotThrow(() => ajv.compile(entry.inputSchema))
      assert.doesNotThrow(() => ajv.compile(entry.outputSchema))
    })

    it(`${name}: no internal title, no $ref, numbers typed inline, every field described`, () => {
      assert.deepStrictEqual(problemsOf(entry.inputSchema), [], "input schema")
      assert.deepStrictEqual(problemsOf(entry.outputSchema), [], "output schema")
    })

    it(`${name}: every input field is typed, and a default it advertises is a valid value`, () => {
      const properties = Predicate.isRecord(entry.inputSchema["properties"])
        ? entry.inputSchema["properties"]
        : {}
      for (const [field, property] of Object.entries(properties)) {
        assert.isTrue(Predicate.isRecord(property) && ("type" in property || "anyOf" in property), field)
        if (Predicate.isRecord(property) && "default" in property) {
          const validate = new Ajv({ strict: true }).compile(property)
          assert.isTrue(
            validate(property["default"]),
            `${field}: default ${JSON.stringify(property["default"])}`
          )
        }
      }
    })
  }

  it("the problem finder finds what Effect's own combinators advertise", () => {
    // The rules must be able to fail: schemas as Effect generates them for Schema.Int,
    // between, maxLength and Unknown break every one.
    const leaky = {
      type: "object",
      $defs: { Int: { type: "integer", title: "int" } },
      properties: {
        limit: { $ref: "#/$defs/Int", title: "between(1, 500)", minimum: 1, maximum: 500 },
        id: { type: "string", title: "maxLength(200)", maxLength: 200 },
        payload: { type: "object", title: "JsonObject", description: "a JSON object" },
        result: { title: "unknown" }
      }
    }
    const problems = problemsOf(leaky).join("\n")
    for (const expected of [
      "#: has $defs",
      "#/properties/limit: has $ref",
      "#/properties/limit: internal title between(1, 500)",
      '#/properties/limit: numeric bounds without "type"',
      "#/properties/limit: no description",
      "#/properties/id: internal title maxLength(200)",
      "#/properties/payload: internal title JsonObject",
      "#/properties/result: internal title unknown",
      "#/properties/result: untyped node with title",
      "#/$defs/Int: internal title int"
    ])
      assert.include(problems, expected)
  })

  it("integers are typed inline with their bounds, and defaults are advertised", () => {
    const property = (server: string, tool: string, field: string) => {
      const found = described.find((d) => d.server === server && d.entry.name === tool)
      const properties = found?.entry.inputSchema["properties"]
      return Predicate.isRecord(properties) && Predicate.isRecord(properties[field]) ? properties[field] : {}
    }
    const pick = (node: Node) => ({
      type: node["type"],
      minimum: node["minimum"],
      maximum: node["maximum"],
      default: node["default"]
    })
    assert.deepStrictEqual(pick(property("tasks", "list", "limit")), {
      type: "integer",
      minimum: 1,
      maximum: 500,
      default: 50
    })
    assert.deepStrictEqual(pick(property("memory", "search", "limit")), {
      type: "integer",
      minimum: 1,
      maximum: 20,
      default: 5
    })
    assert.deepStrictEqual(pick(property("tasks", "read", "wait_seconds")), {
      type: "number",
      minimum: 0,
      maximum: 60,
      default: undefined
    })
  })

  it("a client validating with the advertised schema never refuses arguments the server accepts", () => {
    for (const { server, tool, entry } of described) {
      const fields = argumentTable[server][tool.name] ?? {}
      const validate = new Ajv({ strict: true }).compile(entry.inputSchema)
      const names = Object.keys(fields)
      const calls = fc.record(
        Object.fromEntries(names.map((field) => [field, fields[field]?.valid ?? fc.constant(null)])),
        { requiredKeys: names.filter((field) => fields[field]?.required) }
      )
      fc.assert(
        fc.property(calls, (args) => {
          // Only calls the server accepts: the table's valid values pass its schema.
          if (Effect.runSync(Effect.either(tool.prepare(args)))._tag === "Left") return
          assert.isTrue(validate(args), `${server}.${tool.name} ${JSON.stringify(validate.errors)}`)
        }),
        { numRuns: 200, seed: 20250602 }
      )
    }
  })

  it("the read tool's output accepts a real task view with a receipt", () => {
    const read = described.find((d) => d.server === "tasks" && d.entry.name === "read")
    assert.isDefined(read)
    const validate = new Ajv({ strict: true }).compile(read?.entry.outputSchema ?? {})
    const at = "2026-11-30T00:00:00.000Z"
    const receipt = {
      provider: "claude",
      requested_model: "m",
      model: null,
      model_evidence: { verified: false, source: "s", model_usage: { x: 1 } },
      started_at: at,
      ended_at: at,
      duration_ms: 1,
      exit_code: 0,
      http_status: null,
      usage: { input_tokens: 1 },
      cost_usd: null,
      output_sha256: "a",
      output_bytes: 1
    }
    const view = {
      task_id: "a".repeat(64),
      client_request_id: "r",
      payload_sha256: "b".repeat(64),
      state: "complete",
      result: { any: ["json"] },
      error: null,
      created_at: at,
      updated_at: at,
      started_at: at,
      finished_at: at,
      attempt: 1,
      max_attempts: 1,
      not_before: null,
      cancel_requested_at: null,
      attempts: [
        {
          attempt: 1,
          worker_id: "w",
          pid: 1,
          host: "h",
          started_at: at,
          ended_at: at,
          outcome: "complete",
          error: null,
          receipt
        }
      ]
    }
    assert.isTrue(validate(view), JSON.stringify(validate.errors))
  })

  it("the advertised schemas match the committed snapshot", async () => {
    const advertised = Object.fromEntries(
      servers.map(([server, tools]) => [
        `relaykeep-${server}`,
        tools.map((tool) => {
          const { name, inputSchema, outputSchema } = describeTool(tool)
          return { name, inputSchema, outputSchema }
        })
      ])
    )
    await expect(`${JSON.stringify(advertised, null, 2)}\n`).toMatchFileSnapshot(
      "./__snapshots__/advertised-schemas.json"
    )
  })
})
