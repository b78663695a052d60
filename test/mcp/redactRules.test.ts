/**
 * The redaction rules: each name the review found missed, its variants, benign near-misses, and
 * the table of SECURITY.md, which must list exactly the rules redactRules.ts exports.
 */
import { FileSystem } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { redact } from "../../src/domain/redact.js"
import {
  BenignNames,
  Fragments,
  isSensitiveName,
  Phrases,
  Quantities,
  Words
} from "../../src/domain/redactRules.js"
import { redactText } from "../../src/domain/redactText.js"

const Missed = [
  "pwd",
  "key",
  "sk",
  "jwt",
  "otp",
  "dsn",
  "database_url",
  "connection_string",
  "github_pat",
  "private_key",
  "signing_key",
  "encryption_key",
  "mnemonic"
]

const variants = (name: string): ReadonlyArray<string> => {
  const words = name.split("_")
  const camel = words.map((w, i) => (i === 0 ? w : `${w[0]?.toUpperCase() ?? ""}${w.slice(1)}`)).join("")
  const fullWidth = [...name.toUpperCase()]
    .map((c) => (c === "_" ? c : String.fromCodePoint((c.codePointAt(0) ?? 0) + 0xfee0)))
    .join("")
  return [
    name,
    name.toUpperCase(),
    words.join("-"),
    words.join("."),
    words.join(" "),
    camel,
    `x_${name}_2`,
    fullWidth
  ]
}

describe("redaction rules", () => {
  it("catches every missed name in every variant", () => {
    for (const name of Missed)
      for (const variant of variants(name)) assert.isTrue(isSensitiveName(variant), variant)
  })
  it("leaves benign near-misses alone", () => {
    for (const name of [
      "monkey",
      "keyboard",
      "skip",
      "author",
      "passenger",
      "task_id",
      "compass",
      "path",
      "risk",
      "spin"
    ])
      assert.isFalse(isSensitiveName(name), name)
  })
  it("keeps counts of tokens and ordering keys, in every variant, as names, keys and text", () => {
    const counts = [
      "max_tokens",
      "token_count",
      "tokens",
      "input_tokens",
      "output_tokens",
      "max_output_tokens",
      "completion_tokens",
      "total_tokens",
      "tokens_used",
      "keyword",
      "keywords",
      "key_count",
      "sort_key",
      "idempotency_key",
      "monkey"
    ]
    for (const name of counts) {
      // Spaces are left out (in prose `max tokens=5` names only `tokens`), and so is
      // `x_tokens_2`: only `tokens` alone is a benign name, `x_tokens` is a secret (below).
      const kept = variants(name).filter(
        (v) => !v.includes(" ") && !(name === "tokens" && v.startsWith("x_"))
      )
      for (const variant of kept) {
        assert.isFalse(isSensitiveName(variant), variant)
        assert.deepStrictEqual(redact({ [variant]: 4096 }), { [variant]: 4096 }, variant)
        assert.deepStrictEqual(redact({ [variant]: "kept-value" }), { [variant]: "kept-value" }, variant)
        assert.strictEqual(redactText(`${variant}=kept-value`), `${variant}=kept-value`, variant)
      }
    }
    assert.deepStrictEqual(redact({ usage: { input_tokens: 12, output_tokens: 34 }, max_tokens: 512 }), {
      usage: { input_tokens: 12, output_tokens: 34 },
      max_tokens: 512
    })
  })
  it("still hides a lone key or token, and tokens that are secrets beside a count's words", () => {
    const secrets = [
      "key",
      "keys",
      "token",
      "refresh_tokens",
      "access_token",
      "access_tokens",
      "max_auth_token",
      "session_token_count",
      "sort_api_key",
      "api_key",
      "x_tokens",
      "tokens_secret",
      "github_token"
    ]
    for (const name of secrets)
      for (const variant of variants(name)) {
        assert.isTrue(isSensitiveName(variant), variant)
        assert.deepStrictEqual(redact({ [variant]: "s3cr3t-v4lue" }), { [variant]: "[REDACTED]" }, variant)
        // In prose a name has no spaces: `refresh tokens=…` names `tokens` alone (SECURITY.md).
        if (!variant.includes(" "))
          assert.notInclude(redactText(`${variant}=s3cr3t-v4lue`), "s3cr3t-v4lue", variant)
      }
  })
  it("redacts header pairs in both shapes, nested", () => {
    const value = {
      a: [
        {
          headers: [
            { name: "Authorization", value: "Bearer s1" },
            ["X-Api-Key", "s2"],
            { key: "Accept", value: "json" }
          ]
        }
      ]
    }
    const text = JSON.stringify(redact(value))
    assert.notInclude(text, "s1")
    assert.notInclude(text, "s2")
    assert.include(text, "json")
  })
  it("scrubs URL user-info, credentials and token formats inside prose", () => {
    const text = redactText(
      "see postgres://admin:h4ck3r@db:5432/x, Authorization: Bearer abc.123 and ghp_abcdefghijklmnopqrstuvwxyz0123, password=p455"
    )
    for (const secret of ["h4ck3r", "abc.123", "ghp_abc", "p455"]) assert.notInclude(text, secret)
    assert.include(text, "postgres://[REDACTED]@db:5432/x")
  })
  it("finishes a long adversarial string fast", () => {
    for (const unit of ["a://", "password:'", "-eyJaaaaa", 'x:"', "Bearer "]) {
      const started = performance.now()
      redactText(unit.repeat(100_000))
      assert.isBelow(performance.now() - started, 2000, unit)
    }
  })
  it("redacts a value nested 100,000 deep without overflowing", () => {
    let deep: unknown = { password: "s3" }
    for (let i = 0; i < 100_000; i++) deep = [deep]
    let inner = redact(deep)
    while (Array.isArray(inner)) inner = inner[0]
    assert.deepStrictEqual(inner, { password: "[REDACTED]" })
  })
})

/** The backticked words of a table cell. */
const ticked = (cell: string): ReadonlyArray<string> =>
  [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? "")

describe("the rule table of SECURITY.md", () => {
  it.effect("lists exactly the exported rules, and each example does what its row says", () =>
    Effect.gen(function* () {
      const text = yield* (yield* FileSystem.FileSystem).readFileString("SECURITY.md")
      const start = text.indexOf("<!-- redaction-rules:start -->")
      const end = text.indexOf("<!-- redaction-rules:end -->")
      assert.isTrue(start !== -1 && end > start, "SECURITY.md marks the rule table")
      const rows = text
        .slice(start, end)
        .split("\n")
        .map((line) => line.split("|").map((cell) => cell.trim()))
        .filter((cells) => /^(word|phrase|fragment|quantity|benign name)$/.test(cells[1] ?? ""))
      const of = (kind: string) => rows.filter((cells) => cells[1] === kind)
      const sorted = (items: ReadonlyArray<string>) => [...items].sort()
      assert.deepStrictEqual(
        sorted(of("word").map((cells) => ticked(cells[2] ?? "").join(" "))),
        sorted(Words)
      )
      assert.deepStrictEqual(
        sorted(of("phrase").map((cells) => ticked(cells[2] ?? "").join(" "))),
        sorted(Phrases.map((phrase) => phrase.join(" ")))
      )
      assert.deepStrictEqual(
        sorted(of("fragment").map((cells) => ticked(cells[2] ?? "").join(" "))),
        sorted(Fragments)
      )
      assert.deepStrictEqual(
        of("quantity").map((cells) => ({ segments: ticked(cells[2] ?? ""), beside: ticked(cells[3] ?? "") })),
        Quantities.map((rule) => ({ segments: [...rule.segments], beside: [...rule.beside] }))
      )
      assert.deepStrictEqual(
        sorted(of("benign name").map((cells) => ticked(cells[2] ?? "").join(" "))),
        sorted(BenignNames)
      )
      for (const cells of rows) {
        const example = ticked(cells[4] ?? "")[0] ?? ""
        const kept = (cells[4] ?? "").endsWith("(kept)")
        assert.strictEqual(isSensitiveName(example), !kept, `${cells.join("|")}: example ${example}`)
        assert.strictEqual(kept, cells[1] === "quantity" || cells[1] === "benign name", cells.join("|"))
      }
      assert.strictEqual(
        rows.length,
        Words.length + Phrases.length + Fragments.length + Quantities.length + BenignNames.length
      )
    }).pipe(Effect.provide(nodeContextLayer))
  )
})
