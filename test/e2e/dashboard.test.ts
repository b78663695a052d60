/**
 * `relaykeep dashboard` as a real child process of the built binary: the one URL line on
 * stdout (the token in its fragment), the token file (0600, new at each start unless
 * --keep-token), two dashboards on one root, 127.0.0.1 only, a clean stop on SIGINT; and the
 * same API on PostgreSQL. Needs `npm run build` (and RELAYKEEP_TEST_PG_URL for
 * the PostgreSQL part).
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import type { ChildProcessWithoutNullStreams } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Receipt, TaskSummary } from "../../src/domain/Task.js"
import { failureOutput, jsonOutput, ListOutput, relaykeep, relaykeepBin } from "../support/cli.js"
import { spawnEnv } from "../support/environment.js"
import { useTempDirs } from "../support/files.js"
import { assertSecurityHeaders, request } from "../support/http.js"
import { dropSchema, freshSchema, pgAvailable, pgUrl } from "../support/pg.js"
import { waitFor } from "../support/waitFor.js"
import { WorkerView } from "../../src/worker/registry.js"

const tempDir = useTempDirs()

interface Running {
  readonly child: ChildProcessWithoutNullStreams
  readonly url: URL
  readonly token: string
  readonly port: number
  readonly stdout: () => string
  readonly stderr: () => string
}

const started: Array<ChildProcessWithoutNullStreams> = []
afterAll(() => {
  for (const child of started.splice(0)) if (child.exitCode === null) child.kill("SIGKILL")
})

/** Start the dashboard (under umask 0, so the token's mode must be set, not inherited). */
const startDashboard = (args: ReadonlyArray<string>): Promise<Running> =>
  new Promise((resolve, reject) => {
    const child = spawn(
      "/bin/sh",
      [
        "-c",
        'umask 0 && exec "$0" "$@"',
        process.execPath,
        relaykeepBin,
        "dashboard",
        "--port",
        "0",
        ...args
      ],
      { env: spawnEnv(), stdio: ["pipe", "pipe", "pipe"] }
    )
    started.push(child)
    let stdout = ""
    let stderr = ""
    const timer = setTimeout(() => reject(new Error(`no URL line within 60 s; stderr: ${stderr}`)), 60_000)
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    child.on("exit", (code) => reject(new Error(`exited with ${code} before serving; stderr: ${stderr}`)))
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
      const line = /^RelayKeep dashboard: (http:\/\/127\.0\.0\.1:(\d+)\/#token=([0-9a-f]{64}))\n/.exec(stdout)
      if (line?.[1] === undefined || line[3] === undefined) return
      clearTimeout(timer)
      resolve({
        child,
        url: new URL(line[1]),
        token: line[3],
        port: Number(line[2]),
        stdout: () => stdout,
        stderr: () => stderr
      })
    })
  })

/** SIGINT, and the exit code once it has stopped. */
const stop = (running: Running): Promise<number | null> =>
  new Promise((resolve) => {
    if (running.child.exitCode !== null) return resolve(running.child.exitCode)
    running.child.on("exit", (code, signal) => resolve(code ?? (signal === null ? null : 128)))
    running.child.kill("SIGINT")
  })

/** Whether anything accepts a TCP connection at host:port. */
const accepts = (host: string, port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect({ host, port })
    socket.setTimeout(2_000)
    socket.on("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.on("timeout", () => {
      socket.destroy()
      resolve(false)
    })
    socket.on("error", () => resolve(false))
  })

const SubmitReply = Schema.decodeUnknownSync(
  Schema.parseJson(Schema.Struct({ receipt: Receipt, task: TaskSummary }))
)
const TasksReply = Schema.decodeUnknownSync(
  Schema.parseJson(
    Schema.Struct({ tasks: Schema.Array(TaskSummary), next_cursor: Schema.NullOr(Schema.String) })
  )
)
const HealthStore = Schema.decodeUnknownSync(
  Schema.parseJson(
    Schema.Struct({
      store: Schema.Union(
        Schema.Struct({ kind: Schema.Literal("file"), root: Schema.String }),
        Schema.Struct({ kind: Schema.Literal("postgres"), schema: Schema.String, queue: Schema.String })
      )
    })
  )
)

/** Submit, list and read back one task through the API; returns its receipt. */
const roundTrip = async (running: Running, requestId: string) => {
  const auth = { authorization: `Bearer ${running.token}` }
  const submitted = await request(running.port, "/api/tasks", {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({
      payload: { provider: "ollama", model: "m", prompt: "hello" },
      request_id: requestId
    })
  })
  assert.strictEqual(submitted.status, 201, submitted.body)
  assertSecurityHeaders(submitted, "/api/tasks")
  const { receipt } = SubmitReply(submitted.body)
  const listed = await request(
    running.port,
    `/api/tasks?provider=ollama&q=${encodeURIComponent(requestId)}`,
    {
      headers: auth
    }
  )
  assert.deepStrictEqual(
    TasksReply(listed.body).tasks.map((t) => t.task_id),
    [receipt.task_id]
  )
  const one = await request(running.port, `/api/tasks/${receipt.task_id}`, { headers: auth })
  assert.strictEqual(one.status, 200)
  assert.include(one.body, '"prompt":"hello"')
  return receipt
}

/**
 * Open the event stream, then submit through the API until an event names a submitted task (a
 * stream subscribes as it starts, and PostgreSQL's LISTEN opens with its first subscriber, so
 * the first submissions may come before it hears anything). Returns the ids submitted.
 */
const eventForSubmit = (running: Running, prefix: string): Promise<ReadonlyArray<string>> =>
  new Promise((resolve, reject) => {
    const submitted: Array<string> = []
    let received = ""
    const req = http.request(
      {
        host: "127.0.0.1",
        port: running.port,
        path: "/api/events",
        headers: { authorization: `Bearer ${running.token}` }
      },
      (response) => {
        assert.strictEqual(response.statusCode, 200)
        assert.match(response.headers["content-type"] ?? "", /^text\/event-stream/)
        response.on("data", (chunk: Buffer) => (received += chunk.toString("utf8")))
        const heard = () =>
          submitted.some((id) => received.includes(`event: task\ndata: {"task_id":"${id}","state":"queued"`))
        // Resolves between submissions, so that none is in flight when the caller goes on.
        const submitNext = async (attempt: number) => {
          if (heard()) {
            req.destroy()
            return resolve(submitted)
          }
          if (attempt >= 50) {
            req.destroy()
            return reject(new Error(`no event for ${submitted.length} submissions; got: ${received}`))
          }
          const reply = await request(running.port, "/api/tasks", {
            method: "POST",
            headers: { authorization: `Bearer ${running.token}`, "content-type": "application/json" },
            body: JSON.stringify({ payload: { n: attempt }, request_id: `${prefix}-${attempt}` })
          })
          submitted.push(SubmitReply(reply.body).receipt.task_id)
          setTimeout(() => void submitNext(attempt + 1).catch(reject), 200)
        }
        void submitNext(0).catch(reject)
      }
    )
    req.on("error", (error) => (req.destroyed ? undefined : reject(error)))
    req.end()
  })

const WorkersOutput = Schema.Struct({ workers: Schema.Array(WorkerView) })
const HealthWorkers = Schema.decodeUnknownSync(Schema.parseJson(WorkersOutput))

/**
 * Real `relaykeep worker --watch` processes seen through health: an idle one appears with its
 * heartbeat and goes when it stops; one killed with SIGKILL (no chance to retire) shows as late
 * once its heartbeat is overdue (3 × 5 s).
 */
const workersThroughHealth = async (running: Running, storeArgs: ReadonlyArray<string>) => {
  const workers = async () =>
    HealthWorkers(
      (await request(running.port, "/api/health", { headers: { authorization: `Bearer ${running.token}` } }))
        .body
    ).workers
  const stateOf = async (id: string) => (await workers()).find((worker) => worker.worker_id === id)?.state
  const watcher = (id: string) => {
    const child = spawn(
      process.execPath,
      [relaykeepBin, "worker", "--watch", ...storeArgs, "--worker-id", id],
      {
        env: spawnEnv(),
        stdio: ["pipe", "pipe", "pipe"]
      }
    )
    started.push(child)
    return child
  }
  const exited = (child: ChildProcessWithoutNullStreams) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve()
      child.once("exit", () => resolve())
    })

  const idle = watcher("e2e-idle")
  await waitFor(
    "e2e-idle watching in health",
    async () => ((await stateOf("e2e-idle")) === "watching" ? true : undefined),
    60_000
  )
  const seen = (await workers()).find((worker) => worker.worker_id === "e2e-idle")
  assert.strictEqual(seen?.pid, idle.pid)
  assert.isNotNull(seen?.last_heartbeat_at ?? null)
  // `relaykeep workers` reads the same registry.
  const listed = jsonOutput(WorkersOutput, await relaykeep(["workers", ...storeArgs])).workers
  assert.deepStrictEqual(
    listed.map((worker) => [worker.worker_id, worker.pid, worker.state]),
    [["e2e-idle", idle.pid, "watching"]]
  )
  idle.kill("SIGTERM")
  await exited(idle)
  assert.strictEqual(await stateOf("e2e-idle"), undefined, "retired as it stopped")

  const killed = watcher("e2e-killed")
  await waitFor(
    "e2e-killed watching in health",
    async () => ((await stateOf("e2e-killed")) === "watching" ? true : undefined),
    60_000
  )
  killed.kill("SIGKILL")
  await exited(killed)
  assert.strictEqual(await stateOf("e2e-killed"), "watching", "not late before its heartbeat is overdue")
  await waitFor(
    "e2e-killed late in health",
    async () => ((await stateOf("e2e-killed")) === "late" ? true : undefined),
    60_000
  )
}

describe("relaykeep dashboard (built binary)", () => {
  it(
    "prints the URL line, a new 0600 token at each start (the last one with --keep-token), serves 127.0.0.1 only",
    { timeout: 120_000 },
    async () => {
      const root = path.join(tempDir(), "root")
      const first = await startDashboard(["--root", root])
      assert.strictEqual(first.url.hostname, "127.0.0.1")
      const tokenFile = path.join(root, "dashboard.token")
      assert.strictEqual(fs.statSync(tokenFile).mode & 0o777, 0o600)
      assert.strictEqual(fs.readFileSync(tokenFile, "utf8").trim(), first.token)

      const anonymous = await request(first.port, "/api/health")
      assert.deepStrictEqual(JSON.parse(anonymous.body), { status: "ok", version: "0.1.0" })
      const refused = await request(first.port, "/api/tasks")
      assert.strictEqual(refused.status, 401)
      const health = await request(first.port, "/api/health", {
        headers: { authorization: `Bearer ${first.token}` }
      })
      assert.deepStrictEqual(HealthStore(health.body).store, { kind: "file", root })
      const receipt = await roundTrip(first, "e2e-file")

      // Bound to 127.0.0.1 alone: not another loopback address, not the machine's other interfaces.
      assert.isTrue(await accepts("127.0.0.1", first.port))
      assert.isFalse(await accepts("127.0.0.2", first.port))
      const external = Object.values(os.networkInterfaces())
        .flat()
        .filter((i) => i !== undefined && !i.internal && i.family === "IPv4")
      for (const address of external)
        if (address) assert.isFalse(await accepts(address.address, first.port), address.address)

      const viaEvents = await eventForSubmit(first, "e2e-file-event")
      assert.isAbove(viaEvents.length, 0)

      assert.strictEqual(await stop(first), 130)
      assert.strictEqual(first.stdout().split("\n").filter(Boolean).length, 1, "stdout is the URL line alone")

      // A new start, a new token: the first start's URL no longer opens anything.
      const second = await startDashboard(["--root", root])
      assert.notStrictEqual(second.token, first.token, "a new token at each start")
      assert.strictEqual(fs.readFileSync(tokenFile, "utf8").trim(), second.token)
      assert.strictEqual(fs.statSync(tokenFile).mode & 0o777, 0o600)
      const stillThere = await request(second.port, `/api/tasks/${receipt.task_id}`, {
        headers: { authorization: `Bearer ${second.token}` }
      })
      assert.strictEqual(stillThere.status, 200)
      const stale = await request(second.port, "/api/tasks", {
        headers: { authorization: `Bearer ${first.token}` }
      })
      assert.strictEqual(stale.status, 401)
      await stop(second)

      // --keep-token: the last start's token, and so its URL, again.
      const third = await startDashboard(["--root", root, "--keep-token"])
      assert.strictEqual(third.token, second.token, "the token is reused")
      assert.strictEqual(fs.statSync(tokenFile).mode & 0o777, 0o600)
      const kept = await request(third.port, "/api/tasks", {
        headers: { authorization: `Bearer ${second.token}` }
      })
      assert.strictEqual(kept.status, 200)
      await stop(third)

      // The CLI sees what the dashboard queued.
      const listed = jsonOutput(ListOutput, await relaykeep(["list", "--root", root]))
      assert.deepStrictEqual(
        listed.tasks.filter((t) => t.provider !== null).map((t) => [t.task_id, t.provider]),
        [[receipt.task_id, "ollama"]]
      )
      assert.strictEqual(listed.tasks.length, 1 + viaEvents.length)
    }
  )

  it(
    "two dashboards on one root: each accepts the token it started with; the file holds the last one",
    { timeout: 120_000 },
    async () => {
      const root = path.join(tempDir(), "root")
      const tokenFile = path.join(root, "dashboard.token")
      const first = await startDashboard(["--root", root])
      const second = await startDashboard(["--root", root])
      assert.notStrictEqual(second.token, first.token)
      assert.strictEqual(fs.readFileSync(tokenFile, "utf8").trim(), second.token)
      const status = async (running: Running, token: string) =>
        (
          await request(running.port, "/api/tasks", {
            headers: { authorization: `Bearer ${token}`, host: `127.0.0.1:${running.port}` }
          })
        ).status
      // The first keeps serving its own printed URL; neither accepts the other's token.
      assert.strictEqual(await status(first, first.token), 200)
      assert.strictEqual(await status(second, second.token), 200)
      assert.strictEqual(await status(first, second.token), 401)
      assert.strictEqual(await status(second, first.token), 401)
      // Nor is one's page reached with the other's Host (its port).
      const crossed = await request(first.port, "/api/tasks", {
        headers: { authorization: `Bearer ${first.token}`, host: `127.0.0.1:${second.port}` }
      })
      assert.strictEqual(crossed.status, 403)
      // A third with --keep-token shares the last start's token.
      const third = await startDashboard(["--root", root, "--keep-token"])
      assert.strictEqual(third.token, second.token)
      assert.strictEqual(await status(third, second.token), 200)
      for (const running of [first, second, third]) assert.strictEqual(await stop(running), 130)
    }
  )

  it(
    "a taken port is ServeFailed (exit 1); a port out of range is a usage error (exit 2)",
    { timeout: 120_000 },
    async () => {
      const root = path.join(tempDir(), "root")
      const running = await startDashboard(["--root", root])
      const taken = await relaykeep(["dashboard", "--root", root, "--port", String(running.port)])
      const message = failureOutput(taken, 1, "ServeFailed")
      assert.include(message, `127.0.0.1:${running.port}`)
      assert.include(message, "EADDRINUSE")
      // It failed before drawing a token: the running dashboard's is still the file's.
      assert.strictEqual(fs.readFileSync(path.join(root, "dashboard.token"), "utf8").trim(), running.token)
      await stop(running)
      const outOfRange = await relaykeep(["dashboard", "--root", root, "--port", "65536"])
      assert.include(failureOutput(outOfRange, 2, "UsageError"), "--port")
    }
  )

  it(
    "health shows real watching workers: idle, gone once stopped, late once killed",
    { timeout: 180_000 },
    async () => {
      const root = path.join(tempDir(), "root")
      const running = await startDashboard(["--root", root])
      await workersThroughHealth(running, ["--root", root])
      await stop(running)
    }
  )

  describe.skipIf(!pgAvailable)("on PostgreSQL", () => {
    const schemas: Array<string> = []
    afterAll(async () => {
      for (const schema of schemas.splice(0)) await dropSchema(schema)
    })

    it(
      "serves the same API on a fresh schema; health names schema and queue, never the URL",
      { timeout: 120_000 },
      async () => {
        const schema = freshSchema()
        schemas.push(schema)
        const root = path.join(tempDir(), "root")
        const url = pgUrl ?? ""
        const running = await startDashboard([
          "--root",
          root,
          "--store",
          url,
          "--pg-schema",
          schema,
          "--queue",
          "dash"
        ])
        const health = await request(running.port, "/api/health", {
          headers: { authorization: `Bearer ${running.token}` }
        })
        assert.strictEqual(health.status, 200, health.body)
        assert.deepStrictEqual(HealthStore(health.body).store, { kind: "postgres", schema, queue: "dash" })
        assert.notInclude(health.body, "postgres://")
        assert.strictEqual(fs.statSync(path.join(root, "dashboard.token")).mode & 0o777, 0o600)
        const receipt = await roundTrip(running, "e2e-pg")
        const cancel = await request(running.port, `/api/tasks/${receipt.task_id}/cancel`, {
          method: "POST",
          headers: { authorization: `Bearer ${running.token}` }
        })
        assert.strictEqual(cancel.status, 200)
        assert.include(cancel.body, '"state":"cancelled"')
        const viaEvents = await eventForSubmit(running, "e2e-pg-event")
        assert.isAbove(viaEvents.length, 0)
        await stop(running)
        const listed = jsonOutput(
          ListOutput,
          await relaykeep(["list", "--store", url, "--pg-schema", schema, "--queue", "dash"])
        )
        assert.deepStrictEqual(
          listed.tasks.filter((t) => t.state !== "queued").map((t) => [t.task_id, t.state]),
          [[receipt.task_id, "cancelled"]]
        )
        assert.strictEqual(listed.tasks.length, 1 + viaEvents.length)
      }
    )

    it("health shows real watching workers of the queue", { timeout: 180_000 }, async () => {
      const schema = freshSchema()
      schemas.push(schema)
      const store = ["--store", pgUrl ?? "", "--pg-schema", schema, "--queue", "dash"]
      const running = await startDashboard(["--root", path.join(tempDir(), "root"), ...store])
      await workersThroughHealth(running, store)
      await stop(running)
    })
  })
})
