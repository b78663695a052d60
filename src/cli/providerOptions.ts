/**
 * The provider flags of `relaykeep worker` and `doctor`. What they mean, and how they combine
 * with the environment and `<root>/config.json`, is src/providers/config.ts.
 */
import { Options } from "@effect/cli"
import { Effect, Layer } from "effect"

const text = (name: string, description: string) =>
  Options.text(name).pipe(Options.withDescription(description), Options.optional)

export const providerOptions = {
  claudeExecutable: text("claude-executable", "Absolute path of the Claude Code CLI"),
  codexExecutable: text("codex-executable", "Absolute path of the Codex CLI"),
  workDir: text("work-dir", "Absolute path of the directory the CLIs run in"),
  allowWorkDir: Options.text("allow-work-dir").pipe(
    Options.withDescription(
      "Let a payload name its own work_dir inside this directory, after symbolic links (absolute; repeatable)"
    ),
    Options.repeated
  ),
  codexSkipGitCheck: Options.boolean("codex-skip-git-check").pipe(
    Options.withDescription(
      "Let Codex run in a work dir that is not a git repository (off: Codex refuses; see SECURITY.md)"
    )
  ),
  ollamaUrl: text("ollama-url", "Ollama on this machine, e.g. http://127.0.0.1:11434"),
  openaiUrl: text("openai-url", "An OpenAI-compatible server on this machine, e.g. http://127.0.0.1:8080"),
  stripEnv: Options.text("strip-env").pipe(
    Options.withDescription(
      "Remove variables from the CLIs' environment: a name or a pattern such as AWS_*, any case (repeatable)"
    ),
    Options.repeated
  ),
  passEnv: Options.text("pass-env").pipe(
    Options.withDescription(
      "Pass the CLIs only these variables: names or patterns (repeatable; an allowlist instead of --strip-env)"
    ),
    Options.repeated
  ),
  taskTimeout: text("task-timeout", "Stop a provider after this long (default 30m; 90s, 5m, 2h or seconds)"),
  killGrace: text("kill-grace", "Between SIGTERM and SIGKILL when stopping a provider (default 10s)"),
  maxOutput: text(
    "max-output",
    "Stop a provider whose output passes this many bytes (default 8MiB; K, M, G suffixes)"
  )
}

export type ProviderArgs = {
  readonly [K in keyof typeof providerOptions]: (typeof providerOptions)[K] extends Options.Options<infer A>
    ? A
    : never
}

/**
 * Node's HTTP client, for the providers that call model servers. Loaded by the commands that
 * build providers (`worker`, `doctor`), so that the others start without it.
 */
export const httpClientLayer = Layer.unwrapEffect(
  Effect.map(
    Effect.promise(() => import("@effect/platform-node/NodeHttpClient")),
    (http) => http.layer
  )
)
