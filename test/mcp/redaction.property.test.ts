/**
 * No value under a sensitive key ever reaches an audit file. Random nested JSON carries unique
 * markers; markers under a sensitive key (at any depth, in any case, inside arrays) must vanish
 * and every other marker must survive: first through `redact` alone, then through the real
 * tasks `submit` tool and the file audit log.
 */
import { FileSystem, Path } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer } from "effect"
import { AuditLog } from "../../src/services/AuditLog.js"
import { auditLogLayer } from "../../src/mcp/auditLayer.js"
import { callTool, inProcessContext, toolMap } from "../../src/mcp/pipeline.js"
import { redact } from "../../src/mcp/redact.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"
import { Host } from "../../src/services/Host.js"
import { tempDir } from "../support/stores.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"

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

/** Every byte of every file under `dir`, as text. */
const everyByteUnder = (dir: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const texts: Array<string> = []
    for (const name of yield* fs.readDirectory(dir, { recursive: true })) {
      const file = path.join(dir, name)
      if ((yield* fs.stat(file)).type === "File") texts.push(yield* fs.readFileString(file))
    }
    return texts.join("\n")
  })

/** The tasks tools over a memory queue, audited to files in a fresh `<temp>/audit`. */
const auditedTasks = Effect.gen(function* () {
  const path = yield* Path.Path
  const dir = path.join(yield* tempDir, "audit")
  const layer = Layer.mergeAll(auditLogLayer(dir), memoryTaskStoreLayer()).pipe(
    Layer.provide(Host.layerTest({})),
    Layer.provide(NodeContext.layer)
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
      }).pipe(Effect.provide(NodeContext.layer)),
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
      }).pipe(Effect.provide(NodeContext.layer)),
    { fastCheck: { numRuns: 30, seed: Seed } }
  )
})
