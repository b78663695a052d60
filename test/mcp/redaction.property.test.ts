/**
 * No value under a sensitive key ever reaches an audit file. Random nested JSON carries unique
 * markers; markers under a sensitive key (at any depth, in any case, inside arrays) must vanish
 * and every other marker must survive: first through `redact` alone, then through the real
 * tasks `submit` tool and the file audit log.
 *
 * Then planted secrets (plantedSecrets.ts) through every tool of both servers served in-process
 * (servedRoot.ts) and every error path: unknown fields, ill-typed and over-deep arguments, an
 * unknown tool, damaged task records and memory stores whose field holds the secret, and
 * JSON-RPC lines that do not parse. A secret may not appear in an answer, an audit file, an
 * entry AuditLog lists, or a line the bins' logger writes.
 */
import { FileSystem, Path } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer, Schema } from "effect"
import { randomBytes } from "node:crypto"
import { PassThrough } from "node:stream"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogLayer } from "../../src/mcp/auditLayer.js"
import { callTool, inProcessContext, toolMap } from "../../src/mcp/pipeline.js"
import { redact } from "../../src/domain/redact.js"
import { makeMcpServer } from "../../src/mcp/server.js"
import { LineTransport } from "../../src/mcp/stdioTransport.js"
import { tasksServer } from "../../src/mcp/tasks/server.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"
import { Host } from "../../src/services/Host.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"
import { tempDir } from "../support/stores.js"
import {
  BrokenLines,
  checkNames,
  everySpelling,
  EveryRule,
  MemoryDamages,
  nest,
  plantedDeep,
  RecordDamages,
  secretInText,
  secretText,
  sensitiveName
} from "./plantedSecrets.js"
import { assertNoLeak, everyByteUnder, MemoryRows, servedRoot } from "./servedRoot.js"

type Shape =
  | { readonly kind: "leaf"; readonly marker: boolean; readonly scalar: number | boolean | null }
  | { readonly kind: "array"; readonly items: ReadonlyArray<Shape> }
  | { readonly kind: "object"; readonly entries: ReadonlyArray<Entry> }

interface Entry {
  readonly key: string
  readonly sensitive: boolean
  readonly value: Shape
}

const SensitiveNames = [
  "password",
  "Secret",
  "API_KEY",
  "apiKey",
  "api-key",
  "authorization",
  "Cookie",
  "private_key",
  "privateKey",
  "credentials",
  "db_password",
  "refreshToken",
  "access_token",
  "x-api-key",
  "client_secret",
  "passphrase",
  "sessionId",
  "bearer"
]
// None of these contains a sensitive word; three lowercase letters cannot either.
const BenignNames = [
  "name",
  "id",
  "count",
  "items",
  "config",
  "nested",
  "url",
  "host",
  "user",
  "path",
  "data"
]

/** A sensitive name in random case, sometimes with something before or after it. */
const sensitiveKey = fc
  .tuple(
    fc.constantFrom(...SensitiveNames),
    fc.array(fc.boolean(), { minLength: 20, maxLength: 20 }),
    fc.constantFrom("", "my_", "db", "old-", "X-"),
    fc.constantFrom("", "_2", "Value", "-hdr", "s")
  )
  .map(([name, upper, before, after]) => {
    const cased = [...name].map((c, i) => (upper[i] ? c.toUpperCase() : c.toLowerCase())).join("")
    return { key: `${before}${cased}${after}`, sensitive: true }
  })
const benignKey = fc
  .oneof(fc.constantFrom(...BenignNames), fc.stringMatching(/^[a-z]{1,3}$/))
  .map((key) => ({ key, sensitive: false }))
const entryKey = fc.oneof(sensitiveKey, benignKey)

const shapes = fc.letrec<{ node: Shape; leaf: Shape; array: Shape; object: Shape }>((tie) => ({
  node: fc.oneof({ depthSize: "small", maxDepth: 5 }, tie("leaf"), tie("array"), tie("object")),
  leaf: fc.oneof(
    { arbitrary: fc.constant({ kind: "leaf" as const, marker: true, scalar: null }), weight: 3 },
    fc.oneof(fc.integer(), fc.boolean(), fc.constant(null)).map((scalar) => ({
      kind: "leaf" as const,
      marker: false,
      scalar
    }))
  ),
  array: fc.array(tie("node"), { maxLength: 4 }).map((items) => ({ kind: "array" as const, items })),
  object: fc
    .uniqueArray(fc.record({ name: entryKey, value: tie("node") }), {
      selector: (entry) => entry.name.key,
      maxLength: 5
    })
    .map((entries) => ({
      kind: "object" as const,
      entries: entries.map(({ name, value }) => ({ ...name, value }))
    }))
}))

/** An object holding at least one sensitive key, so that every run has something to hide. */
const objectWithSecret = fc
  .tuple(sensitiveKey, shapes.node, shapes.object)
  .map(([name, value, rest]): Shape => {
    const others = rest.kind === "object" ? rest.entries.filter((entry) => entry.key !== name.key) : []
    return { kind: "object", entries: [...others, { ...name, value }] }
  })

interface Markers {
  readonly hidden: Array<string>
  readonly shown: Array<string>
}

/** The JSON value of a shape; each marker leaf becomes a unique string, sorted by exposure. */
const materialize = (shape: Shape, markers: Markers, prefix: string, underSensitive = false): unknown => {
  switch (shape.kind) {
    case "leaf": {
      if (!shape.marker) return shape.scalar
      const list = underSensitive ? markers.hidden : markers.shown
      const marker = `@${prefix}${markers.hidden.length + markers.shown.length}@`
      list.push(marker)
      return marker
    }
    case "array":
      return shape.items.map((item) => materialize(item, markers, prefix, underSensitive))
    case "object":
      return Object.fromEntries(
        shape.entries.map((entry) => [
          entry.key,
          materialize(entry.value, markers, prefix, underSensitive || entry.sensitive)
        ])
      )
  }
}

const assertRedacted = (text: string, markers: Markers) => {
  for (const marker of markers.hidden) assert.notInclude(text, marker, "a value under a sensitive key leaked")
  for (const marker of markers.shown) assert.include(text, marker, "an ordinary value was lost")
}

const Seed = 20250601

describe("redact (pure)", () => {
  it.prop(
    "hides every value under a sensitive key and keeps every other value",
    { shape: shapes.node, top: objectWithSecret },
    ({ shape, top }) => {
      for (const root of [shape, top]) {
        const markers: Markers = { hidden: [], shown: [] }
        const value = materialize(root, markers, "m")
        const before = JSON.stringify(value)
        const redacted = redact(value)
        assertRedacted(JSON.stringify(redacted), markers)
        assert.strictEqual(JSON.stringify(value), before, "the input is not changed")
        assert.deepStrictEqual(redact(redacted), redacted, "redacting twice changes nothing more")
      }
    },
    { fastCheck: { numRuns: 300, seed: Seed } }
  )
})

/** The tasks tools over a memory queue, audited to files in a fresh `<temp>/audit`. */
const auditedTasks = Effect.gen(function* () {
  const path = yield* Path.Path
  const dir = path.join(yield* tempDir, "audit")
  const layer = Layer.mergeAll(auditLogLayer(dir), memoryTaskStoreLayer()).pipe(
    Layer.provide(Host.layerTest({})),
    Layer.provide(nodeContextLayer)
  )
  return { dir, layer, tools: toolMap(taskTools) }
})

describe("redaction through the pipeline into the audit files", () => {
  it.scoped.prop(
    "submit with secrets in the payload at random depths writes none of them",
    { payloads: fc.array(objectWithSecret, { minLength: 1, maxLength: 4 }) },
    ({ payloads }) =>
      Effect.gen(function* () {
        const { dir, layer, tools } = yield* auditedTasks
        const markers: Markers = { hidden: [], shown: [] }
        const statuses = yield* Effect.forEach(payloads, (shape, i) =>
          Effect.gen(function* () {
            const payload = materialize(shape, markers, `p${i}-`)
            const args = { client_request_id: `request-${i}`, payload }
            const result = yield* callTool(tools, "submit", args, inProcessContext("relaykeep-tasks"))
            return result.isError === true ? `error: ${result.content[0]?.text}` : "ok"
          })
        ).pipe(Effect.provide(layer))
        assert.deepStrictEqual(
          statuses,
          payloads.map(() => "ok")
        )
        const entries = yield* Effect.flatMap(AuditLog, (audit) => audit.list({})).pipe(Effect.provide(layer))
        assert.strictEqual(entries.length, payloads.length)
        assertRedacted(yield* everyByteUnder(dir), markers)
      }).pipe(Effect.provide(nodeContextLayer)),
    { fastCheck: { numRuns: 30, seed: Seed } }
  )

  // Ill-typed arguments are audited too, with the decoder's message: it must not quote a secret.
  it.scoped.prop(
    "ill-typed arguments holding secrets write none of them",
    {
      secret: objectWithSecret,
      place: fc.constantFrom("client_request_id", "payload in an array", "arguments in an array")
    },
    ({ secret, place }) =>
      Effect.gen(function* () {
        const { dir, layer, tools } = yield* auditedTasks
        const markers: Markers = { hidden: [], shown: [] }
        const value = materialize(secret, markers, "q")
        const args =
          place === "client_request_id"
            ? { client_request_id: value, payload: {} }
            : place === "payload in an array"
              ? { client_request_id: "request", payload: [value] }
              : [{ client_request_id: "request", payload: value }]
        const result = yield* callTool(tools, "submit", args, inProcessContext("relaykeep-tasks")).pipe(
          Effect.provide(layer)
        )
        assert.match(result.content[0]?.text ?? "", /^InvalidArguments: /)
        const entries = yield* Effect.flatMap(AuditLog, (audit) => audit.list({})).pipe(Effect.provide(layer))
        assert.deepStrictEqual(
          entries.map((entry) => entry.status),
          ["invalid"]
        )
        for (const marker of markers.hidden) assert.notInclude(yield* everyByteUnder(dir), marker, place)
      }).pipe(Effect.provide(nodeContextLayer)),
    { fastCheck: { numRuns: 30, seed: Seed } }
  )
})

type ToolName = "submit" | "read" | "cancel" | "list" | "search" | "memory-read" | "nope"

/** Each tool's well-formed arguments, the field an ill-typed call replaces, the one text goes in. */
const ToolCases: ReadonlyArray<{
  readonly name: ToolName
  readonly server: "tasks" | "memory"
  readonly tool: string
  readonly base: Readonly<Record<string, unknown>>
  readonly typed: string
  readonly text: string | undefined
}> = [
  {
    name: "submit",
    server: "tasks",
    tool: "submit",
    base: { client_request_id: "req", payload: { prompt: "hi" } },
    typed: "client_request_id",
    text: undefined
  },
  {
    name: "read",
    server: "tasks",
    tool: "read",
    base: { task_id: "a".repeat(64), payload_sha256: "b".repeat(64) },
    typed: "task_id",
    text: "payload_sha256"
  },
  {
    name: "cancel",
    server: "tasks",
    tool: "cancel",
    base: { task_id: "c".repeat(64), payload_sha256: "d".repeat(64) },
    typed: "payload_sha256",
    text: "task_id"
  },
  { name: "list", server: "tasks", tool: "list", base: {}, typed: "limit", text: "cursor" },
  {
    name: "search",
    server: "memory",
    tool: "search",
    base: { query: "deploy" },
    typed: "limit",
    text: "query"
  },
  { name: "memory-read", server: "memory", tool: "read", base: { id: "mem-1" }, typed: "id", text: "id" },
  { name: "nope", server: "tasks", tool: "nope", base: {}, typed: "x", text: "x" }
]

/** Arguments nested 70 levels deep, past MaxArgumentDepth. */
const tooDeep = nest(
  "bottom",
  Array.from({ length: 70 }, () => ({ kind: "array" as const, at: 0 }))
)

/** A secret, and the same secret planted several ways, for one call of each path. */
const plantings = secretText.chain((secret) =>
  fc.record({
    secret: fc.constant(secret),
    extra: plantedDeep(secret),
    typed: plantedDeep(secret),
    deep: plantedDeep(secret),
    payload: plantedDeep(secret),
    text: secretInText(secret)
  })
)

describe("planted secrets through every tool and every error path", () => {
  it.prop(
    "every name the generator builds is one the rules call sensitive",
    { names: fc.array(sensitiveName, { minLength: 50, maxLength: 50 }) },
    ({ names }) => assert.deepStrictEqual(checkNames(names), []),
    { fastCheck: { numRuns: 200, seed: Seed } }
  )

  it.scoped("every rule in every spelling, in an accepted payload and in a refused call, leaks nothing", () =>
    Effect.gen(function* () {
      const served = yield* servedRoot
      const secrets: Array<string> = []
      yield* Effect.gen(function* () {
        for (const [index, rule] of EveryRule.entries()) {
          const names = everySpelling(rule)
          assert.deepStrictEqual(checkNames(names), [], rule.segments.join(" "))
          const planted = Object.fromEntries(
            names.map((name) => {
              const secret = `zQ9${randomBytes(16).toString("hex")}`
              secrets.push(secret)
              return [name, secret]
            })
          )
          const submitted = yield* served.call("tasks", "submit", {
            client_request_id: `rule-${index}`,
            payload: { prompt: "hi", planted }
          })
          assert.notStrictEqual(submitted.isError, true, submitted.content[0]?.text)
          const refused = yield* served.call("tasks", "read", {
            task_id: "a".repeat(64),
            payload_sha256: "b".repeat(64),
            planted
          })
          assert.strictEqual(refused.isError, true)
        }
        const outputs = yield* served.outputs
        assert.strictEqual(outputs.entries.length, EveryRule.length * 2)
        // Nothing was shortened, so every planted key is in the audit log to be looked at.
        assert.isTrue(outputs.entries.every((entry) => entry.arguments_truncated === undefined))
        assertNoLeak(outputs, secrets)
      }).pipe(Effect.provide(served.layer), Effect.withConsole(served.console))
    }).pipe(Effect.provide(nodeContextLayer))
  )

  it.scoped.prop(
    "valid, unknown-field, ill-typed and over-deep arguments of every tool leak nothing",
    { cases: fc.array(plantings, { minLength: ToolCases.length, maxLength: ToolCases.length }) },
    ({ cases }) =>
      Effect.gen(function* () {
        const served = yield* servedRoot
        const expected: Array<readonly [string, string]> = []
        yield* Effect.gen(function* () {
          for (const [index, tool] of ToolCases.entries()) {
            const plant = cases[index]
            if (plant === undefined) continue
            const paths: ReadonlyArray<readonly [string, unknown, string]> = [
              ["extra", { ...tool.base, extra_field: plant.extra }, "invalid"],
              ["ill-typed", { ...tool.base, [tool.typed]: plant.typed }, "invalid"],
              ["over-deep", { ...tool.base, extra: { shallow: plant.deep, deep: tooDeep } }, "invalid"],
              ...(tool.name === "submit"
                ? [
                    [
                      "in the payload",
                      {
                        client_request_id: `req-${index}`,
                        payload: { prompt: plant.text, data: plant.payload }
                      },
                      "ok"
                    ] as const
                  ]
                : []),
              ...(tool.text === undefined
                ? []
                : [["as text", { ...tool.base, [tool.text]: plant.text }, ""] as const])
            ]
            for (const [path, args, status] of paths) {
              assert.include(JSON.stringify(args), plant.secret, "the secret was planted")
              yield* served.call(tool.server, tool.tool, args)
              expected.push([`${tool.name} ${path}`, status])
            }
          }
          const outputs = yield* served.outputs
          assert.strictEqual(outputs.entries.length, expected.length, "every call is audited once")
          outputs.entries.forEach((entry, i) => {
            const [where, status] = expected[i] ?? ["", ""]
            if (status !== "") assert.strictEqual(entry.status, status, `${where}: ${entry.error?.message}`)
          })
          assertNoLeak(
            outputs,
            cases.map((plant) => plant.secret)
          )
        }).pipe(Effect.provide(served.layer), Effect.withConsole(served.console))
      }).pipe(Effect.provide(nodeContextLayer)),
    { fastCheck: { numRuns: 25, seed: Seed, endOnFailure: true }, timeout: 120_000 }
  )
})

const ReceiptOf = Schema.decodeUnknownSync(
  Schema.Struct({
    structuredContent: Schema.Struct({ task_id: Schema.String, payload_sha256: Schema.String })
  })
)

describe("planted secrets in damaged records", () => {
  it.scoped.prop(
    "a damaged task record or memory store whose field holds a secret leaks it nowhere",
    {
      tasks: fc.array(fc.tuple(secretText, fc.integer({ min: 0, max: RecordDamages.length - 1 })), {
        minLength: 1,
        maxLength: 3
      }),
      memory: fc.tuple(secretText, fc.integer({ min: 0, max: MemoryDamages.length - 1 }))
    },
    ({ memory, tasks }) =>
      Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const path = yield* Path.Path
        const served = yield* servedRoot
        yield* Effect.gen(function* () {
          const answers: Array<string> = []
          for (const [index, [secret, damage]] of tasks.entries()) {
            const args = { client_request_id: `req-${index}`, payload: { prompt: "hi", password: secret } }
            const receipt = ReceiptOf(yield* served.call("tasks", "submit", args)).structuredContent
            const file = path.join(served.root, "tasks", `${receipt.task_id}.json`)
            const [name, damaged] = RecordDamages[damage] ?? RecordDamages[0] ?? ["", () => ""]
            const record: unknown = JSON.parse(yield* fs.readFileString(file))
            if (typeof record !== "object" || record === null) return assert.fail("a record is an object")
            yield* fs.writeFileString(file, damaged({ ...record }, secret))
            const read = yield* served.call("tasks", "read", receipt)
            assert.match(read.content[0]?.text ?? "", /^InvalidRecord: /, name)
            yield* served.call("tasks", "cancel", receipt)
            yield* served.call("tasks", "read", { ...receipt, wait_seconds: 0 })
            yield* served.call("tasks", "submit", args)
            answers.push(name)
          }
          yield* served.call("tasks", "list", {})
          const [memorySecret, memoryDamage] = memory
          const line = (MemoryDamages[memoryDamage] ?? (() => ""))(memorySecret)
          yield* fs.writeFileString(
            served.memoryFile,
            `${MemoryRows.map((row) => JSON.stringify(row)).join("\n")}\n${line}\n`
          )
          const search = yield* served.call("memory", "search", { query: "deploy" })
          assert.match(search.content[0]?.text ?? "", /^InvalidRecord: /, line)
          yield* served.call("memory", "read", { id: "mem-1" })
          assertNoLeak(yield* served.outputs, [...tasks.map(([secret]) => secret), memorySecret])
        }).pipe(Effect.provide(served.layer), Effect.withConsole(served.console))
      }).pipe(Effect.provide(nodeContextLayer)),
    { fastCheck: { numRuns: 25, seed: Seed, endOnFailure: true }, timeout: 120_000 }
  )
})

describe("planted secrets in JSON that does not parse", () => {
  it.scopedLive.prop(
    "each refused line is answered with an error that quotes none of it",
    { secret: secretText, extra: fc.integer({ min: 0, max: BrokenLines.length - 1 }) },
    ({ extra, secret }) =>
      Effect.gen(function* () {
        const served = yield* servedRoot
        yield* Effect.gen(function* () {
          const { server } = yield* makeMcpServer(tasksServer)
          const input = new PassThrough()
          const output = new PassThrough()
          const lines: Array<string> = []
          output.on("data", (chunk: Buffer) =>
            lines.push(...chunk.toString("utf8").split("\n").filter(Boolean))
          )
          yield* Effect.acquireRelease(
            Effect.promise(() => server.connect(new LineTransport(input, output))),
            () => Effect.promise(() => server.close())
          )
          const sent = [
            ...BrokenLines.map((line) => line(secret)),
            // The same line with invalid UTF-8 after the secret.
            Buffer.concat([
              (BrokenLines[extra] ?? BrokenLines[0] ?? (() => Buffer.alloc(0)))(secret),
              Buffer.from([0xff])
            ]),
            Buffer.concat([
              Buffer.from(`{"password":"${secret}`),
              Buffer.from([0xc3, 0x28]),
              Buffer.from(`"}`)
            ]),
            Buffer.from(`{"password":"${secret}"}`)
          ]
          for (const line of sent) input.write(Buffer.concat([line, Buffer.from("\n")]))
          yield* Effect.promise(
            () =>
              new Promise<void>((resolve) => {
                const check = () => (lines.length >= sent.length ? resolve() : setTimeout(check, 5))
                check()
              })
          ).pipe(Effect.timeout("10 seconds"))
          assert.strictEqual(lines.length, sent.length, "every line is answered once")
          // Arguments nested too deep are the one refusal left to the pipeline: a tool error, audited.
          for (const line of lines)
            assert.match(
              line,
              /"error":\{"code":-32(700|600),"message":"(Parse error|Invalid Request): |"isError":true/,
              line
            )
          assert.strictEqual(lines.filter((line) => line.includes('"isError":true')).length, 1)
          assertNoLeak({ ...(yield* served.outputs), answers: lines.join("\n") }, [secret])
        }).pipe(Effect.provide(served.layer), Effect.withConsole(served.console))
      }).pipe(Effect.provide(nodeContextLayer)),
    { fastCheck: { numRuns: 20, seed: Seed, endOnFailure: true } }
  )
})
