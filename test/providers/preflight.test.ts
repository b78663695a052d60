/**
 * What is checked before anything starts: the worker's paths (absolute, existing, runnable)
 * and the payload (exactly three keys, a model that can never become a flag). Each case fails
 * with a typed error, and the fake's record file is never written: nothing was spawned.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { JsonObject } from "../../src/domain/Task.js"
import type { ProviderSettings } from "../../src/providers/settings.js"
import type { Sandbox } from "../support/fakeCli.js"
import {
  failureOf,
  fakeClaude,
  fakeCodex,
  providerLayer,
  runProvider,
  sandbox,
  settings
} from "../support/fakeCli.js"

type Cli = "claude" | "codex"
const executables: Record<Cli, string> = { claude: fakeClaude, codex: fakeCodex }
const withExecutable = (cli: Cli, executable: string | undefined): Partial<ProviderSettings> =>
  cli === "claude" ? { claudeExecutable: executable } : { codexExecutable: executable }

interface Case {
  readonly name: string
  /** The settings for this case, given a sandbox; the default is the real fake and work dir. */
  readonly settings?: (cli: Cli, box: Sandbox) => Partial<ProviderSettings>
  readonly payload?: (cli: Cli) => JsonObject
  readonly tag: "ProviderUnavailable" | "InvalidPayload"
  readonly reason: RegExp
}

/** A copy of the fake that cannot be executed (mode 644). */
const notExecutable = (cli: Cli, box: Sandbox) => {
  const copy = path.join(box.dir, `${cli}-copy`)
  fs.copyFileSync(executables[cli], copy)
  fs.chmodSync(copy, 0o644)
  return copy
}

const cases: ReadonlyArray<Case> = [
  {
    name: "no executable configured",
    settings: (cli) => withExecutable(cli, undefined),
    tag: "ProviderUnavailable",
    reason: /no --(claude|codex)-executable is configured/
  },
  {
    name: "a relative executable (no PATH lookup)",
    settings: (cli) => withExecutable(cli, path.relative(process.cwd(), executables[cli])),
    tag: "ProviderUnavailable",
    reason: /must be an absolute path/
  },
  {
    name: "a bare command name",
    settings: (cli) => withExecutable(cli, cli),
    tag: "ProviderUnavailable",
    reason: /must be an absolute path/
  },
  {
    name: "a missing executable",
    settings: (cli, box) => withExecutable(cli, path.join(box.dir, "no-such-cli")),
    tag: "ProviderUnavailable",
    reason: /does not exist/
  },
  {
    name: "a file that is not executable",
    settings: (cli, box) => withExecutable(cli, notExecutable(cli, box)),
    tag: "ProviderUnavailable",
    reason: /is not an executable file/
  },
  {
    name: "a directory as the executable",
    settings: (cli, box) => withExecutable(cli, box.workDir),
    tag: "ProviderUnavailable",
    reason: /is not an executable file/
  },
  {
    name: "no work dir configured",
    settings: () => ({ workDir: undefined }),
    tag: "ProviderUnavailable",
    reason: /no --work-dir is configured/
  },
  {
    name: "a relative work dir",
    settings: () => ({ workDir: "work" }),
    tag: "ProviderUnavailable",
    reason: /--work-dir must be an absolute path/
  },
  {
    name: "a missing work dir",
    settings: (_cli, box) => ({ workDir: path.join(box.dir, "gone") }),
    tag: "ProviderUnavailable",
    reason: /does not exist/
  },
  {
    name: "a work dir that is a file",
    settings: (cli) => ({ workDir: executables[cli] }),
    tag: "ProviderUnavailable",
    reason: /is not a directory/
  },
  {
    name: "a model that starts with -",
    payload: (cli) => ({ provider: cli, model: "--dangerously-skip-permissions", prompt: "hi" }),
    tag: "InvalidPayload",
    reason: /not starting with '-'/
  },
  {
    name: "a model of one dash",
    payload: (cli) => ({ provider: cli, model: "-", prompt: "hi" }),
    tag: "InvalidPayload",
    reason: /not starting with '-'/
  },
  {
    name: "a model with a space",
    payload: (cli) => ({ provider: cli, model: "sonnet --yolo", prompt: "hi" }),
    tag: "InvalidPayload",
    reason: /1-100 letters/
  },
  {
    name: "a model of 101 characters",
    payload: (cli) => ({ provider: cli, model: "m".repeat(101), prompt: "hi" }),
    tag: "InvalidPayload",
    reason: /1-100 letters/
  },
  {
    name: "an extra key",
    payload: (cli) => ({ provider: cli, model: "sonnet", prompt: "hi", work_dir: "/" }),
    tag: "InvalidPayload",
    reason: /work_dir/
  },
  {
    name: "no prompt",
    payload: (cli) => ({ provider: cli, model: "sonnet" }),
    tag: "InvalidPayload",
    reason: /prompt/
  },
  {
    name: "no model",
    payload: (cli) => ({ provider: cli, prompt: "hi" }),
    tag: "InvalidPayload",
    reason: /model/
  },
  {
    name: "a prompt that is not a string",
    payload: (cli) => ({ provider: cli, model: "sonnet", prompt: ["rm", "-rf", "/"] }),
    tag: "InvalidPayload",
    reason: /prompt|string/
  }
]

describe("checks before a CLI starts", { timeout: 120_000 }, () => {
  for (const cli of ["claude", "codex"] as const) {
    for (const c of cases) {
      it.scopedLive(`${cli}: ${c.name} fails with ${c.tag} and spawns nothing`, () =>
        Effect.gen(function* () {
          const box = yield* sandbox
          const config = settings({
            ...withExecutable(cli, executables[cli]),
            workDir: box.workDir,
            ...c.settings?.(cli, box)
          })
          const payload = c.payload?.(cli) ?? { provider: cli, model: "sonnet", prompt: "hi" }
          const failure = failureOf(
            yield* runProvider(payload).pipe(Effect.provide(providerLayer(config, box.env("success"))))
          )
          assert.strictEqual(failure._tag, c.tag, failure.message)
          assert.match(failure.message, c.reason)
          assert.isTrue(
            failure.message.startsWith(c.tag === "InvalidPayload" ? `payload for ${cli}:` : `${cli} is`)
          )
          assert.isFalse(box.recorded(), "the fake never ran")
        })
      )
    }
  }

  it.scopedLive(
    "the same fake with a valid payload and paths does run (the cases above are not vacuous)",
    () =>
      Effect.gen(function* () {
        const box = yield* sandbox
        const config = settings({
          claudeExecutable: fakeClaude,
          codexExecutable: fakeCodex,
          workDir: box.workDir
        })
        const layer = providerLayer(config, box.env("success"))
        yield* runProvider({ provider: "claude", model: "sonnet", prompt: "hi" }).pipe(Effect.provide(layer))
        yield* runProvider({ provider: "codex", model: "sonnet", prompt: "hi" }).pipe(Effect.provide(layer))
        assert.deepStrictEqual(
          box.runs().map((run) => run.argv[0]),
          ["-p", "exec"]
        )
      })
  )
})
