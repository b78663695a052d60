/**
 * What the worker decides about running providers. A payload can never change any of it:
 * which executables, in which directory, against which local servers, within which limits.
 */
import { Either } from "effect"

export interface ProviderSettings {
  /** Absolute paths; no PATH lookup. Checked when a task needs them. */
  readonly claudeExecutable: string | undefined
  readonly codexExecutable: string | undefined
  /** The directory the CLIs run in; absolute, and it must exist. */
  readonly workDir: string | undefined
  /**
   * Directories inside which a payload may name its own `work_dir` (after symbolic links are
   * resolved); none: a payload's `work_dir` is refused.
   */
  readonly allowedWorkDirs: ReadonlyArray<string>
  /**
   * Let Codex run outside a git repository (`--skip-git-repo-check`). Off by default: a work
   * dir under git is how a user reviews and undoes what an unattended agent changed.
   */
  readonly codexSkipGitCheck: boolean
  /** Loopback http base URLs, checked when the worker starts. */
  readonly ollamaUrl: URL | undefined
  readonly openaiUrl: URL | undefined
  /** Variables (names or `*` patterns, any case) removed from the environment the CLIs inherit. */
  readonly stripEnv: ReadonlyArray<string>
  /** When not empty, the only variables (names or patterns) the CLIs inherit. */
  readonly passEnv: ReadonlyArray<string>
  readonly taskTimeoutMillis: number
  /** Between SIGTERM and SIGKILL when a provider is stopped. */
  readonly killGraceMillis: number
  readonly maxOutputBytes: number
}

export const DefaultTaskTimeoutMillis = 30 * 60_000
export const DefaultKillGraceMillis = 10_000
export const DefaultMaxOutputBytes = 8 * 1024 * 1024

export const defaultSettings: ProviderSettings = {
  claudeExecutable: undefined,
  codexExecutable: undefined,
  workDir: undefined,
  allowedWorkDirs: [],
  codexSkipGitCheck: false,
  ollamaUrl: undefined,
  openaiUrl: undefined,
  stripEnv: [],
  passEnv: [],
  taskTimeoutMillis: DefaultTaskTimeoutMillis,
  killGraceMillis: DefaultKillGraceMillis,
  maxOutputBytes: DefaultMaxOutputBytes
}

const LoopbackHosts = new Set(["127.0.0.1", "localhost", "[::1]"])

/**
 * A local model server's URL: plain http on a loopback address, nothing else. Prompts never
 * leave the machine, and no proxy or TLS setting can send them elsewhere.
 */
export const parseLoopbackUrl = (text: string): Either.Either<URL, string> => {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    return Either.left("is not a URL")
  }
  if (url.protocol !== "http:") return Either.left(`must use http:, not ${url.protocol}`)
  if (!LoopbackHosts.has(url.hostname)) {
    return Either.left(`must point at this machine (127.0.0.1, localhost or ::1), not ${url.hostname}`)
  }
  if (url.username !== "" || url.password !== "") return Either.left("must not carry credentials")
  return Either.right(url)
}

/** Join a base URL and an API path, keeping any path prefix of the base. */
export const endpoint = (base: URL, path: string): string =>
  `${base.origin}${base.pathname.replace(/\/+$/, "")}${path}`
