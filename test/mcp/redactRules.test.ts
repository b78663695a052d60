/** The redaction rules: each name the review found missed, its variants, and benign near-misses. */
import { assert, describe, it } from "@effect/vitest"
import { redact } from "../../src/mcp/redact.js"
import { isSensitiveName } from "../../src/mcp/redactRules.js"
import { redactText } from "../../src/mcp/redactText.js"

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
