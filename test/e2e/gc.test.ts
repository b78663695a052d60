/** `relaykeep gc` through the built binary, on a real root. */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { InvalidRecordReport, Receipt } from "../../src/domain/Task.js"
import { PassReport } from "../../src/worker/pass.js"
import { WorkerEventLine } from "../../src/domain/workerEvent.js"
import { CheckOutput, jsonOutput, ListOutput, relaykeep, relaykeepBin } from "../support/cli.js"
import { spawnEnv } from "../support/environment.js"
import { useTempDirs } from "../support/files.js"
import { hostFileStoreAt } from "../support/stores.js"
import { waitFor } from "../support/waitFor.js"

const tempDir = useTempDirs()

const GcOutput = Schema.Struct({
  finished_before: Schema.String,
  keep_last: Schema.NullOr(Schema.Number),
  removed: Schema.Array(
    Schema.Struct({
      task_id: Schema.String,
      client_request_id: Schema.String,
      state: Schema.Literal("complete", "failed", "cancelled"),
      finished_at: Schema.String
    })
  ),
  invalid: Schema.Array(InvalidRecordReport),
  dry_run: Schema.Boolean
})

const submit = async (root: string, id: string, payload: string) =>
  jsonOutput(Receipt, await relaykeep(["submit", "--root", root, "--id", id, "--payload", payload]))

/** The task as the root holds it, read in-process (its state, or the error's tag). */
const read = (root: string, receipt: Receipt) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(hostFileStoreAt(root), (store) =>
        store.read(receipt.task_id, receipt.payload_sha256).pipe(
          Effect.map((view): { readonly state: string; readonly attempt?: number } => view),
          Effect.catchAll((error) =>
            Effect.succeed<{ readonly state: string; readonly attempt?: number }>({ state: error._tag })
          )
        )
      )
    )
  )

/** Three finished tasks (the oldest finished first), and one still queued. */
const populate = async (root: string) => {
  const first = await submit(root, "first", '{"n":1}')
  jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
  const second = await submit(root, "second", '{"n":2}')
  jsonOutput(PassReport, await relaykeep(["worker", "--root", root]))
  const cancelled = await submit(root, "third", '{"n":3}')
  jsonOutput(
    Schema.Unknown,
    await relaykeep([
      "cancel",
      "--root",
      root,
      "--task-id",
      cancelled.task_id,
      "--sha",
      cancelled.payload_sha256
    ])
  )
  const queued = await submit(root, "queued", '{"n":4}')
  return { first, second, cancelled, queued }
}

describe("relaykeep gc", { timeout: 120_000 }, () => {
  it("--dry-run lists and keeps; then removes all but --keep-last, one line each and a summary; the queued task stays", async () => {
    const root = tempDir()
    const { first, second, cancelled, queued } = await populate(root)
    const args = ["gc", "--root", root, "--finished-before", "1ms"]

    const dry = jsonOutput(GcOutput, await relaykeep([...args, "--dry-run", "--json"]))
    assert.isTrue(dry.dry_run)
    assert.deepStrictEqual(
      dry.removed.map((task) => [task.client_request_id, task.state]),
      [
        ["first", "complete"],
        ["second", "complete"],
        ["third", "cancelled"]
      ]
    )
    assert.strictEqual((await read(root, first)).state, "complete")

    const text = await relaykeep([...args, "--keep-last", "1"])
    assert.strictEqual(text.code, 0, text.stderr)
    assert.strictEqual(text.stderr, "")
    const lines = text.stdout.trimEnd().split("\n")
    assert.strictEqual(lines.length, 3)
    assert.match(
      lines[0] ?? "",
      new RegExp(`^removed ${first.task_id} complete finished \\S+ request "first"$`)
    )
    assert.match(
      lines[1] ?? "",
      new RegExp(`^removed ${second.task_id} complete finished \\S+ request "second"$`)
    )
    assert.match(lines[2] ?? "", /^removed 2 finished tasks that finished before \d{4}-\d\d-\d\dT/)

    // Read says the task is unknown; list no longer shows it; the kept and the queued remain.
    assert.strictEqual((await read(root, first)).state, "UnknownTask")
    const listed = jsonOutput(ListOutput, await relaykeep(["list", "--root", root]))
    assert.deepStrictEqual(listed.tasks.map((task) => task.client_request_id).sort(), ["queued", "third"])
    assert.strictEqual((await read(root, cancelled)).state, "cancelled")
    assert.strictEqual((await read(root, queued)).state, "queued")

    // The removed request id, submitted again: a new task, queued.
    const again = await submit(root, "first", '{"n":1}')
    assert.strictEqual(again.task_id, first.task_id)
    assert.notStrictEqual(again.created_at, first.created_at)
    const view = await read(root, again)
    assert.strictEqual(view.state, "queued")
    assert.strictEqual(view.attempt, 0)
    const check = jsonOutput(CheckOutput, await relaykeep(["check", "--root", root]))
    assert.isTrue(check.ok)
    assert.strictEqual(check.records, 3)
  })

  it("a damaged record is reported and kept, whatever its age", async () => {
    const root = tempDir()
    await populate(root)
    const damaged = path.join(root, "tasks", `${"d".repeat(64)}.json`)
    fs.writeFileSync(damaged, "{ not json", { mode: 0o600 })
    const result = await relaykeep(["gc", "--root", root, "--finished-before", "1ms"])
    assert.strictEqual(result.code, 0, result.stderr)
    const lines = result.stdout.trimEnd().split("\n")
    assert.isTrue(
      lines.some((line) => line.startsWith(`kept damaged ${damaged}: `)),
      result.stdout
    )
    assert.match(
      lines[lines.length - 1] ?? "",
      /^removed 3 finished tasks .*; kept 1 damaged record \(relaykeep check\)$/
    )
    assert.isTrue(fs.existsSync(damaged))
  })

  it("bad flags name the flag, exit 2 and remove nothing", async () => {
    const root = tempDir()
    const { first } = await populate(root)
    for (const [args, flag] of [
      [["--finished-before", "soon"], "--finished-before"],
      // A bare number would be seconds: everything that finished a moment ago.
      [["--finished-before", "30"], "--finished-before: must name its unit"],
      [["--finished-before", "1ms", "--keep-last", "-1"], "--keep-last"],
      [[], "--finished-before"]
    ] as const) {
      const result = await relaykeep(["gc", "--root", root, ...args])
      assert.strictEqual(result.code, 2, result.stderr)
      assert.include(result.stderr, flag)
      assert.strictEqual(result.stdout, "")
    }
    assert.strictEqual((await read(root, first)).state, "complete")
  })

  it("a watching worker with --retention collects at its start and reports it as an event", async () => {
    const root = tempDir()
    const { first, second, cancelled } = await populate(root)
    await new Promise((resolve) => setTimeout(resolve, 20))
    const child = spawn(
      process.execPath,
      [relaykeepBin, "worker", "--root", root, "--watch", "--retention", "10ms", "--log-format", "json"],
      { env: spawnEnv(), stdio: ["ignore", "pipe", "pipe"] }
    )
    const stderr: Array<string> = []
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk.toString("utf8")))
    const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
    const events = () =>
      stderr
        .join("")
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => Schema.decodeUnknownSync(Schema.parseJson(WorkerEventLine))(line))
    const collected = await waitFor("a collected event", () =>
      events().find((event) => event.event === "collected" && event.removed > 0)
    )
    child.kill("SIGINT")
    assert.strictEqual(await exited, 0)
    assert.isTrue(collected.event === "collected" && collected.removed === 3 && collected.damaged === 0)
    for (const receipt of [first, second, cancelled])
      assert.strictEqual((await read(root, receipt)).state, "UnknownTask")
  })
})
