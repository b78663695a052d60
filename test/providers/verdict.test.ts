/**
 * The judges on messages the recorded fixtures do not cover: what other releases, other
 * servers and other failures of the same kinds say (quoted from the CLIs' error texts).
 */
import { assert, describe, it } from "@effect/vitest"
import { judgeClaude } from "../../src/providers/claude.js"
import { classifyCodexError, judgeCodex } from "../../src/providers/codex.js"

const claudeResult = (fields: Record<string, unknown>) =>
  JSON.stringify({ type: "result", subtype: "success", is_error: true, ...fields })

describe("Codex's turn errors", () => {
  for (const [message, retryable, reason] of [
    ["exceeded retry limit, last status: 429 Too Many Requests", true, /^the model API failed/],
    ["unexpected status 503 Service Unavailable: upstream", true, /^the model API failed/],
    [
      "HTTP status server error (503 Service Unavailable) for url (http://127.0.0.1:1/v1/responses)",
      true,
      /^the model API failed/
    ],
    ["stream disconnected before completion: error sending request", true, /^the model API failed/],
    ["Request timed out", true, /^the model API failed/],
    ["unexpected status 501 Not Implemented: no such route", false, /^the turn failed/],
    [
      "exceeded retry limit, last status: 429 Too Many Requests: insufficient_quota",
      false,
      /^the account is out of quota/
    ],
    ["unexpected status 401 Unauthorized: error sending request", false, /^could not authenticate/],
    ["unexpected status 404 Not Found", false, /or the model provider's base_url$/],
    ["the tool_timeout_sec value is not a number", false, /^the turn failed/]
  ] as const) {
    it(`${JSON.stringify(message)}: ${retryable ? "retried" : "not retried"}`, () => {
      const classified = classifyCodexError(message)
      assert.strictEqual(classified.retryable, retryable)
      assert.match(classified.reason, reason)
    })
  }

  it("a turn.failed without an error object is still the failed turn, not a missing one", () => {
    const verdict = judgeCodex(
      { exitCode: 1, stdout: '{"type":"turn.started"}\n{"type":"turn.failed"}\n', stderr: "" },
      "/work"
    )
    assert.deepInclude(verdict, { _tag: "Failed", reason: "the turn failed: turn failed", retryable: false })
  })
})

describe("Claude's is_error results", () => {
  it("an API error with no status (no answer at all, after Claude's retries) is retried", () => {
    for (const result of ["API Error: Connection error.", "API Error: Request timed out."]) {
      const verdict = judgeClaude({
        exitCode: 1,
        stdout: claudeResult({ terminal_reason: "api_error", api_error_status: null, result }),
        stderr: ""
      })
      assert.deepInclude(verdict, { _tag: "Failed", retryable: true })
      assert.match(verdict._tag === "Failed" ? verdict.reason : "", /^could not reach the API \(API Error: /)
    }
  })

  it("a turn limit is a stop, named by its reason, not retried", () => {
    const verdict = judgeClaude({
      exitCode: 1,
      stdout: claudeResult({ subtype: "error_max_turns", terminal_reason: "max_turns", result: "" }),
      stderr: ""
    })
    assert.deepInclude(verdict, {
      _tag: "Failed",
      reason: "stopped (max_turns): no message",
      retryable: false
    })
  })
})

describe("what a provider reports, bounded in the receipt", () => {
  it("usage past 8 KiB of JSON keeps only its size; smaller usage is kept whole", async () => {
    const { boundedJson } = await import("../../src/domain/provider.js")
    const small = { input_tokens: 1, output_tokens: 2 }
    assert.deepStrictEqual(boundedJson(small), small)
    const big = { junk: "x".repeat(10_000) }
    assert.deepStrictEqual(boundedJson(big), { truncated: true, json_bytes: JSON.stringify(big).length })
    assert.isNull(boundedJson(null))
  })
})
