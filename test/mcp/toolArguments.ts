/**
 * Arguments for every tool of both servers, by field: what each field accepts and what it must
 * reject, and calls built from them (well-formed, ill-typed, with a key missing or extra, or
 * anything at all).
 */
import { Either, FastCheck as fc } from "effect"
import { decodeCursor, encodeCursor } from "../../src/domain/submission.js"

export interface Field {
  readonly required: boolean
  /** Values the input schema accepts (the call may still fail in the store). */
  readonly valid: fc.Arbitrary<unknown>
  /** Values it must reject: wrong types, nulls, out of range, huge strings where those are wrong. */
  readonly invalid: fc.Arbitrary<unknown>
}

const huge = fc.integer({ min: 201, max: 200_000 }).map((n) => "a".repeat(n))
const nonString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.anything(), { maxLength: 3 }),
  fc.dictionary(fc.string(), fc.anything(), { maxKeys: 3 })
)
const nonNumber = fc.oneof(
  fc.string(),
  huge,
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.object({ maxDepth: 1 })
)
const hex64 = fc.stringMatching(/^[0-9a-f]{64}$/)
const notHex64 = fc.oneof(
  nonString,
  huge,
  fc.string().filter((s) => !/^[0-9a-f]{64}$/.test(s))
)
const printableId = fc.stringMatching(/^[A-Za-z0-9 _.:-]{1,60}$/)
const badId = fc.oneof(nonString, huge, fc.constantFrom("", "bad\u0000id", "tab\tbed", "\u007f"))
const intOutside = (min: number, max: number) =>
  fc.oneof(
    fc.integer({ max: min - 1 }),
    fc.integer({ min: max + 1 }),
    fc.double({ min: min + 0.01, max: max - 0.01, noInteger: true }),
    nonNumber
  )
const States = ["queued", "running", "complete", "failed", "cancelled"]
/** Providers whose member payloads a broadcast judges (or refuses) before anything is stored. */
const Judged = ["claude", "codex", "ollama", "openai", "mcp-tool", "broadcast"]

/** Anything a payload may not be: not a JSON object. */
const notAnObject = fc.oneof(
  fc.string(),
  huge,
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.anything())
)

export const tools: Readonly<
  Record<"tasks" | "memory", Readonly<Record<string, Readonly<Record<string, Field>>>>>
> = {
  tasks: {
    submit: {
      client_request_id: { required: true, valid: printableId, invalid: badId },
      payload: {
        required: true,
        valid: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
        invalid: notAnObject
      }
    },
    read: {
      task_id: { required: true, valid: hex64, invalid: notHex64 },
      payload_sha256: { required: true, valid: hex64, invalid: notHex64 },
      wait_seconds: {
        required: false,
        valid: fc.double({ min: 0, max: 60, noNaN: true }),
        invalid: fc.oneof(
          fc.double({ max: -0.001 }),
          fc.double({ min: 60.001 }),
          fc.constant(Number.NaN),
          nonNumber
        )
      }
    },
    cancel: {
      task_id: { required: true, valid: hex64, invalid: notHex64 },
      payload_sha256: { required: true, valid: hex64, invalid: notHex64 }
    },
    list: {
      state: {
        required: false,
        valid: fc.constantFrom(...States),
        invalid: fc.oneof(
          nonString,
          fc.string().filter((s) => !States.includes(s))
        )
      },
      limit: { required: false, valid: fc.integer({ min: 1, max: 500 }), invalid: intOutside(1, 500) },
      cursor: {
        required: false,
        // Any cursor list could have returned; other text is refused before the store is asked.
        valid: fc
          .tuple(fc.string(), fc.string())
          .map(([createdAt, taskId]) => encodeCursor(createdAt, taskId)),
        invalid: fc.oneof(
          nonString,
          huge,
          fc.string().filter((text) => Either.isLeft(decodeCursor(text)))
        )
      }
    },
    broadcast: {
      client_request_id: { required: true, valid: printableId, invalid: badId },
      targets: {
        required: true,
        // Providers this side does not judge (a worker's own), so any shared part may go with them.
        valid: fc.uniqueArray(
          fc.record({
            provider: fc.stringMatching(/^[a-z][a-z0-9_-]{0,15}$/).filter((name) => !Judged.includes(name)),
            model: fc.stringMatching(/^[A-Za-z0-9._:/ -]{1,40}$/)
          }),
          { minLength: 1, maxLength: 8, selector: (target) => `${target.provider} ${target.model}` }
        ),
        invalid: fc.oneof(
          nonString.filter((value) => !Array.isArray(value)),
          fc.string(),
          fc.constant([]),
          fc.constant(Array.from({ length: 9 }, (_, n) => ({ provider: "p", model: `m${n}` }))),
          fc.constant([
            { provider: "p", model: "m" },
            { provider: "p", model: "m" }
          ])
        )
      },
      payload: {
        required: true,
        valid: fc.dictionary(
          fc.string().filter((key) => key !== "provider" && key !== "model"),
          fc.jsonValue({ maxDepth: 2 }),
          { maxKeys: 4 }
        ),
        invalid: notAnObject
      }
    },
    read_group: {
      group_id: { required: true, valid: hex64, invalid: notHex64 },
      payload_sha256: { required: true, valid: hex64, invalid: notHex64 },
      wait_seconds: {
        required: false,
        // Short: a valid call on a group nobody runs waits it out.
        valid: fc.constantFrom(0, 0.001),
        invalid: fc.oneof(
          fc.double({ max: -0.001 }),
          fc.double({ min: 60.001 }),
          fc.constant(Number.NaN),
          nonNumber
        )
      }
    }
  },
  memory: {
    search: {
      query: {
        required: true,
        valid: fc.oneof(
          fc.string().filter((s) => s.trim().length > 0),
          fc.constantFrom("lumen", "deploy approval"),
          // At the limits: 1,000 characters, 32 distinct terms, a term of 200; repeats count once.
          fc.constantFrom(
            Array.from({ length: 32 }, (_, n) => `t${n}`.padEnd(30, "x"))
              .join(" ")
              .padEnd(1000, " "),
            "b".repeat(200),
            "lumen ".repeat(166)
          )
        ),
        invalid: fc.oneof(
          nonString,
          fc.constantFrom("", " ", "\t\n"),
          fc.integer({ min: 1001, max: 200_000 }).map((n) => "a ".repeat(n).slice(0, n)),
          fc.constantFrom(Array.from({ length: 33 }, (_, n) => `t${n}`).join(" "), "b".repeat(201))
        )
      },
      limit: { required: false, valid: fc.integer({ min: 1, max: 20 }), invalid: intOutside(1, 20) }
    },
    read: {
      id: {
        required: true,
        valid: fc.oneof(printableId, fc.constantFrom("mem-1", "mem-2")),
        invalid: badId
      }
    }
  }
}

export type Server = keyof typeof tools
export type Call = {
  readonly server: Server
  readonly tool: string
  readonly args: unknown
} & (
  | { readonly kind: "anything" | "valid" }
  | { readonly kind: "wrong" | "missing"; readonly field: string }
  | { readonly kind: "extra"; readonly key: string }
)

const withoutKey = (args: Readonly<Record<string, unknown>>, key: string) =>
  Object.fromEntries(Object.entries(args).filter(([name]) => name !== key))

const callsFor = (
  server: Server,
  tool: string,
  fields: Readonly<Record<string, Field>>
): fc.Arbitrary<Call> => {
  const names = Object.keys(fields)
  const valid = (requiredKeys: ReadonlyArray<string>) =>
    fc.record(Object.fromEntries(names.map((name) => [name, fields[name]?.valid ?? fc.constant(null)])), {
      requiredKeys: [...requiredKeys]
    })
  const required = names.filter((name) => fields[name]?.required)
  const some = valid(required)
  const base = { server, tool }
  const calls: Array<fc.Arbitrary<Call>> = [
    fc.anything().map((args) => ({ ...base, kind: "anything", args })),
    some.map((args) => ({ ...base, kind: "valid", args })),
    fc
      .tuple(
        some,
        fc.oneof(
          ...names.map((name) => fc.tuple(fc.constant(name), fields[name]?.invalid ?? fc.constant(null)))
        )
      )
      .map(([args, [field, bad]]) => ({ ...base, kind: "wrong", field, args: { ...args, [field]: bad } })),
    fc
      .tuple(
        some,
        fc.string().filter((key) => !Object.hasOwn(fields, key)),
        fc.anything()
      )
      .map(([args, key, value]) => ({ ...base, kind: "extra", key, args: { ...args, [key]: value } }))
  ]
  if (required.length > 0)
    calls.push(
      fc
        .tuple(valid(names), fc.constantFrom(...required))
        .map(([args, field]) => ({ ...base, kind: "missing", field, args: withoutKey(args, field) }))
    )
  return fc.oneof(...calls)
}

export const anyCall = fc.oneof(
  ...Object.entries(tools.tasks).map(([tool, fields]) => callsFor("tasks", tool, fields)),
  ...Object.entries(tools.memory).map(([tool, fields]) => callsFor("memory", tool, fields))
)
