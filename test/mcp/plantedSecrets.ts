/**
 * Secrets planted in JSON values, for the redaction properties: under names built from every rule
 * of redactRules.ts (in every case, with every separator, camelCase and full-width), in header
 * pairs, and in the text shapes redactText.ts knows (URL user-info, `name=value`, Bearer), at a
 * random depth of otherwise ordinary JSON. Each secret is a distinct random string of 34
 * characters in no known token format, so finding it (or half of it) anywhere is a leak. Also:
 * damaged task records and memory store lines, and JSON-RPC lines that do not parse, each
 * holding a secret where the damage is.
 */
import { FastCheck as fc } from "effect"
import { Fragments, isSensitiveName, Phrases, Words } from "../../src/domain/redactRules.js"

/** `zQ9` and 32 random hex digits: no rule catches it by its shape, and no false match is possible. */
export const secretText = fc
  .uint8Array({ minLength: 16, maxLength: 16 })
  .map((bytes) => `zQ9${Buffer.from(bytes).toString("hex")}`)

/** The parts of a secret that must not appear: the whole, and each half of its random part. */
export const secretParts = (secret: string): ReadonlyArray<string> => [
  secret,
  secret.slice(3, 19),
  secret.slice(19)
]

/** Where each secret must not appear; a list of what leaked, empty when nothing did. */
export const leaks = (text: string, secrets: ReadonlyArray<string>): ReadonlyArray<string> =>
  secrets.filter((secret) => secretParts(secret).some((part) => text.includes(part)))

export type Rule = { readonly kind: "word" | "phrase" | "fragment"; readonly segments: ReadonlyArray<string> }

const rules: fc.Arbitrary<Rule> = fc.oneof(
  fc.constantFrom(...Words).map((word): Rule => ({ kind: "word", segments: [word] })),
  fc.constantFrom(...Phrases).map((phrase): Rule => ({ kind: "phrase", segments: phrase })),
  fc.constantFrom(...Fragments).map((fragment): Rule => ({ kind: "fragment", segments: [fragment] }))
)

/** Segments written around a rule; none of them counts or orders (redactRules.ts, Quantities). */
const Affixes = ["db", "old", "my", "user", "x", "prod"]
const Separators = ["_", "-", ".", "", "camel"] as const
const Cases = ["lower", "upper", "capital"] as const

const capital = (text: string): string => `${text.slice(0, 1).toUpperCase()}${text.slice(1)}`

/** ASCII letters and digits as their full-width forms, which NFKC folds back. */
const fullWidth = (text: string): string =>
  [...text]
    .map((c) => (/[A-Za-z0-9]/.test(c) ? String.fromCodePoint((c.codePointAt(0) ?? 0) + 0xfee0) : c))
    .join("")

export interface Spelling {
  readonly rule: Rule
  readonly before: string | undefined
  readonly after: string | undefined
  readonly separator: (typeof Separators)[number]
  readonly letterCase: (typeof Cases)[number]
  readonly wide: boolean
}

/**
 * A sensitive name built from one rule: `DB_PASSWORD`, `old-api-key`, `userDatabaseUrl`,
 * `ＪＷＴ`. A word is a whole segment, so it gets affixes only where a separator (or camelCase)
 * keeps it apart from them.
 */
export const spell = ({ after, before, letterCase, rule, separator, wide }: Spelling): string => {
  const apart = separator !== "" || rule.kind !== "word"
  const segments = [
    ...(apart && before !== undefined ? [before] : []),
    ...rule.segments,
    ...(apart && after !== undefined ? [after] : [])
  ]
  const joined =
    separator === "camel"
      ? segments.map((segment, index) => (index === 0 ? segment : capital(segment))).join("")
      : segments.join(separator)
  const cased =
    separator === "camel"
      ? joined
      : letterCase === "upper"
        ? joined.toUpperCase()
        : letterCase === "capital"
          ? capital(joined)
          : joined
  return wide ? fullWidth(cased) : cased
}

export const sensitiveName: fc.Arbitrary<string> = fc
  .record({
    rule: rules,
    before: fc.option(fc.constantFrom(...Affixes), { nil: undefined }),
    after: fc.option(fc.constantFrom(...Affixes), { nil: undefined }),
    separator: fc.constantFrom(...Separators),
    letterCase: fc.constantFrom(...Cases),
    wide: fc.boolean()
  })
  .map(spell)

/** Every rule of the rule set, as data for `spell`. */
export const EveryRule: ReadonlyArray<Rule> = [
  ...Words.map((word): Rule => ({ kind: "word", segments: [word] })),
  ...Phrases.map((phrase): Rule => ({ kind: "phrase", segments: phrase })),
  ...Fragments.map((fragment): Rule => ({ kind: "fragment", segments: [fragment] }))
]

/**
 * Every spelling of one rule: each separator (camelCase among them) in each case, narrow and
 * full-width, bare and between affixes. Distinct names only (camelCase ignores the case).
 */
export const everySpelling = (rule: Rule): ReadonlyArray<string> => [
  ...new Set(
    Separators.flatMap((separator) =>
      Cases.flatMap((letterCase) =>
        [false, true].flatMap((wide) =>
          [undefined, "db"].map((affix) =>
            spell({
              rule,
              before: affix,
              after: affix === undefined ? undefined : "old",
              separator,
              letterCase,
              wide
            })
          )
        )
      )
    )
  )
]

/** Keys that no rule matches, and that are not the members of a header pair. */
const BenignKeys = ["data", "items", "nested", "config", "list", "meta", "options", "note", "x"]

/** One way a secret is written into a value. */
export const planted = (secret: string): fc.Arbitrary<unknown> =>
  fc.oneof(
    // Under a sensitive key, as it is or wrapped again.
    fc.tuple(sensitiveName, fc.constantFrom("bare", "array", "object")).map(([name, wrap]) => ({
      [name]: wrap === "bare" ? secret : wrap === "array" ? [1, secret] : { inner: secret }
    })),
    // A header pair, as an object (members in any case) and as a two-item array.
    fc
      .tuple(
        sensitiveName,
        fc.constantFrom("name", "Name", "key", "HEADER", "field"),
        fc.constantFrom("value", "Value", "values", "val", "content")
      )
      .map(([name, nameMember, valueMember]) => ({ [nameMember]: name, [valueMember]: secret })),
    sensitiveName.map((name) => [name, secret]),
    fc
      .constantFrom("Authorization", "X-Api-Key", "Cookie", "Proxy-Authorization")
      .map((name) => [{ name, value: name === "Cookie" ? `sid=${secret}` : `Bearer ${secret}` }]),
    // The text shapes, in a string under an ordinary key.
    secretInText(secret).map((text) => ({ note: text }))
  )

/** A string holding the secret in a shape the text rules know. */
export const secretInText = (secret: string): fc.Arbitrary<string> =>
  fc.oneof(
    fc
      .constantFrom("postgres", "https", "redis", "mongodb+srv")
      .map((scheme) => `see ${scheme}://admin:${secret}@db.internal:5432/app`),
    fc.constant(`clone https://${secret}@github.com/o/r.git`),
    sensitiveName.map((name) => `connect with ${name}=${secret} now`),
    sensitiveName.map((name) => `${name}: "${secret}"`),
    fc.constant(`Authorization: Bearer ${secret}`),
    fc.constant(`the header was Bearer ${secret}, then`)
  )

/** One step down: into an array (at a random place among numbers) or an object (beside others). */
type Step =
  { readonly kind: "array"; readonly at: number } | { readonly kind: "object"; readonly key: string }

const steps: fc.Arbitrary<ReadonlyArray<Step>> = fc.array(
  fc.oneof(
    fc.integer({ min: 0, max: 3 }).map((at): Step => ({ kind: "array", at })),
    fc.constantFrom(...BenignKeys).map((key): Step => ({ kind: "object", key }))
  ),
  { maxLength: 12 }
)

/** `value` at the end of `path`, with ordinary values around it on the way. */
export const nest = (value: unknown, path: ReadonlyArray<Step>): unknown =>
  path.reduceRight<unknown>(
    (inner, step) =>
      step.kind === "array"
        ? [...Array.from({ length: step.at }, (_, i) => i), inner, 7]
        : { [step.key]: inner, count: 3, label: "ordinary" },
    value
  )

/** The secret, planted one way, at a random depth. */
export const plantedDeep = (secret: string): fc.Arbitrary<unknown> =>
  fc.tuple(planted(secret), steps).map(([value, path]) => nest(value, path))

/** A sanity check of the generator itself: every name it builds is one the rules call sensitive. */
export const checkNames = (names: ReadonlyArray<string>): ReadonlyArray<string> =>
  names.filter((name) => !isSensitiveName(name))

/** Ways a stored task record is damaged so that the damaged field holds the secret. */
export const RecordDamages: ReadonlyArray<
  readonly [string, (record: Record<string, unknown>, secret: string) => string]
> = [
  ["state", (record, secret) => JSON.stringify({ ...record, state: secret })],
  ["created_at", (record, secret) => JSON.stringify({ ...record, created_at: secret })],
  ["attempts", (record, secret) => JSON.stringify({ ...record, attempts: [{ password: secret }] })],
  ["client_request_id", (record, secret) => JSON.stringify({ ...record, client_request_id: secret })],
  [
    "payload",
    (record, secret) =>
      JSON.stringify({ ...record, payload: { ...Object(record["payload"]), api_key: secret, note: secret } })
  ],
  ["unterminated", (record, secret) => JSON.stringify(record).replace(/}$/, `,"note":"${secret}`)],
  ["bad escape", (record, secret) => JSON.stringify(record).replace(/}$/, `,"note":"${secret}\\q"}`)],
  ["duplicate key", (record, secret) => JSON.stringify(record).replace(/}$/, `,"state":"${secret}"}`)],
  ["bare word", (record, secret) => JSON.stringify(record).replace(/}$/, `,"note":${secret}}`)]
]

/** Damaged lines of a memory store, each holding the secret. */
export const MemoryDamages: ReadonlyArray<(secret: string) => string> = [
  (secret) => `{"id":"mem-9","text":"x","source":"s","tags":"${secret}"}`,
  (secret) => `{"id":"mem-9","text":"x","source":"s","password":"${secret}"}`,
  (secret) => `{"id":"mem-9","text":"${secret}`,
  (secret) => `{"id":"mem-9","text":"x","source":${secret}}`,
  (secret) => `{"id":"mem-9","text":"x","source":"s","source":"${secret}"}`,
  (secret) => `{"id":"mem-9","text":"x\\u${secret}","source":"s"}`
]

/** Lines an MCP client could send that our parser refuses, each holding the secret. */
const BrokenArguments: ReadonlyArray<(s: string) => string> = [
  (s) => `{"password":"${s}`,
  (s) => `{"password":"${s}\\q"}`,
  (s) => `{"password":"${s}","password":"x"}`,
  (s) => `{"note":${s}}`,
  (s) => `{"password":"${s}"} trailing ${s}`,
  (s) => `{"password":"${s}","n":123456789012345678901234567890}`,
  (s) => `{"password":"${s}\t"}`,
  (s) => `{"password":"\\ud800${s}"}`,
  (s) => `{"password":"${s}", "deep": ${"[".repeat(1100)}${"]".repeat(1100)}}`
]
export const BrokenLines: ReadonlyArray<(secret: string) => Buffer> = BrokenArguments.map(
  (args) => (secret: string) =>
    Buffer.from(
      `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"submit","arguments":${args(secret)}}}`
    )
)
