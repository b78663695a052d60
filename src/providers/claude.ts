/**
 * Claude Code: `claude -p --output-format json --model M`, the prompt on stdin, in the work
 * dir. No permission, sandbox or approval flags are added: the CLI runs with its own settings.
 */
import { Effect, Either, Schema } from "effect"
import { ProviderFailed } from "../domain/errors.js"
import { MaxDetailChars, truncate } from "../domain/provider.js"
import type { ProviderDefinition } from "./registry.js"
import { cliReceipt, makeCliLauncher } from "./cli.js"
import type { ProviderSettings } from "./settings.js"

/** The fields of Claude's JSON result that RelayKeep keeps; others are ignored. */
const ClaudeResult = Schema.parseJson(
  Schema.Struct({
    result: Schema.optional(Schema.String),
    is_error: Schema.Boolean,
    subtype: Schema.optional(Schema.String),
    usage: Schema.optional(Schema.Unknown),
    modelUsage: Schema.optional(Schema.Unknown),
    total_cost_usd: Schema.optional(Schema.Number)
  })
)
const decodeClaude = Schema.decodeUnknownEither(ClaudeResult)

export const claudeArgs = (model: string): ReadonlyArray<string> => [
  "-p",
  "--output-format",
  "json",
  "--model",
  model
]

export const makeClaudeProvider = (settings: ProviderSettings) =>
  Effect.gen(function* () {
    const launch = yield* makeCliLauncher("claude", settings.claudeExecutable, claudeArgs, settings)
    const definition: ProviderDefinition = {
      name: "claude",
      run: (task) =>
        Effect.gen(function* () {
          const { payload, run } = yield* launch(task)
          const stdout = new TextDecoder().decode(run.stdout)
          const decoded = decodeClaude(stdout)
          const failed = (reason: string, retryable: boolean, stdoutError?: string) =>
            new ProviderFailed({
              provider: "claude",
              reason,
              retryable,
              stderr_tail: run.stderrTail,
              ...(stdoutError === undefined ? {} : { stdout_error: truncate(stdoutError, MaxDetailChars) }),
              receipt: cliReceipt("claude", payload.model, run, { usage: null, costUsd: null })
            })
          if (Either.isLeft(decoded)) {
            return yield* run.exitCode === 0
              ? failed("the output is not Claude's JSON result", false)
              : failed(`exited with code ${run.exitCode} without a result`, true)
          }
          const answer = decoded.right
          const receipt = cliReceipt("claude", payload.model, run, {
            usage: answer.usage ?? null,
            costUsd: answer.total_cost_usd ?? null,
            modelUsage: answer.modelUsage
          })
          if (answer.is_error || run.exitCode !== 0) {
            return yield* new ProviderFailed({
              provider: "claude",
              reason: answer.is_error
                ? `reported an error (${answer.subtype ?? "is_error"})`
                : `exited with code ${run.exitCode}`,
              retryable: false,
              stderr_tail: run.stderrTail,
              ...(answer.result === undefined
                ? {}
                : { stdout_error: truncate(answer.result, MaxDetailChars) }),
              receipt
            })
          }
          return {
            result: {
              provider: "claude",
              requested_model: payload.model,
              model: null,
              model_evidence: receipt.model_evidence,
              text: answer.result ?? ""
            },
            receipt
          }
        })
    }
    return definition
  })
