/**
 * mcp-roundtrip: a submit then a read through the real `relaykeep-tasks` server over stdio,
 * against a bare SDK server (bench/bareServer.ts) whose submit does the same durable write and
 * whose read reads the file back; the same SDK client and stdio transport drive both. Only
 * the round trips are timed: the servers are started, initialized and listed beforehand.
 *
 * Three more series split the gap, each measured in this process: the file store's own submit
 * + read (`store`), against the floor's durable write + read of the same bytes (`floor`), and
 * the two audit entries a round trip writes (`audit`: `AuditLog.append` twice, lock, write and
 * fsync included, the read's answered once written as the pipeline does). What the store costs
 * over the floor is the store's share of the gap, the audit its share; the rest is the
 * server's (pipeline, encoding, stdio, the Effect runtime).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import { Layer, ManagedRuntime, Schema } from "effect"
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  writeSync
} from "node:fs"
import path from "node:path"
import { fileURLToPath } from "node:url"
import type { AuditEntry } from "../../src/index.js"
import { AuditLog, auditLogLayer, ClientRequestId, Host, TaskStore } from "../../src/index.js"
import type { Benchmark } from "../harness.js"
import { median } from "../harness.js"
import { now } from "../timing.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"

/** Round trips (a submit and a read) per run. */
const RoundTrips = 100

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
const tasksBin = path.join(repo, "dist", "bin", "relaykeep-tasks.js")
const bareServer = path.join(repo, "bench", "bareServer.ts")

/** The environment of a spawned server: ours, minus anything that would choose another store. */
const serverEnv = (): Record<string, string> =>
  Object.fromEntries(
    Object.entries(process.env).flatMap(([name, value]) =>
      value === undefined || name.startsWith("RELAYKEEP_") ? [] : [[name, value]]
    )
  )

const connect = async (name: string, args: ReadonlyArray<string>) => {
  const client = new Client({ name: `bench-${name}`, version: "1" })
  await client.connect(
    new StdioClientTransport({ command: process.execPath, args: [...args], env: serverEnv(), cwd: repo })
  )
  // A client lists the tools before calling them (and the SDK client then checks each result
  // against its tool's output schema, as it would for any user).
  await client.listTools()
  return client
}

const ToolText = Schema.Struct({
  content: Schema.NonEmptyArray(Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })),
  isError: Schema.optional(Schema.Boolean)
})
const Receipt = Schema.parseJson(Schema.Struct({ task_id: Schema.String, payload_sha256: Schema.String }))
const View = Schema.parseJson(Schema.Struct({ task_id: Schema.String, state: Schema.String }))
const BareReceipt = Schema.parseJson(Schema.Struct({ task_id: Schema.String }))
const BareRecord = Schema.parseJson(
  Schema.Struct({ task_id: Schema.String, client_request_id: Schema.String })
)

/** Call a tool and return its text; an error result fails the run, never passes for a fast one. */
const call = async (client: Client, name: string, args: Record<string, unknown>): Promise<string> => {
  const result = Schema.decodeUnknownSync(ToolText)(await client.callTool({ name, arguments: args }))
  const text = result.content[0].text
  if (result.isError === true) throw new Error(`${name} failed: ${text}`)
  return text
}

/** Fixed-width names and prompts, so that every record has the same size. */
const requestId = (run: number, n: number) =>
  `bench-${String(run + 1).padStart(3, "0")}-${String(n).padStart(4, "0")}`
const payloadOf = (id: string) => ({
  provider: "echo",
  prompt: `round trip ${id}: the quick brown fox jumps over the lazy dog`
})

/** The floor's durable replace of `file` with `bytes`, as bench/bareServer.ts does it. */
const durableWrite = (dir: string, name: string, bytes: Uint8Array) => {
  const temp = path.join(dir, `.${name}.tmp`)
  const fd = openSync(temp, "wx", 0o600)
  try {
    writeSync(fd, bytes)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  renameSync(temp, path.join(dir, name))
  const dirFd = openSync(dir, "r")
  try {
    fsyncSync(dirFd)
  } finally {
    closeSync(dirFd)
  }
}

const auditEntryOf = (tool: string, id: string): AuditEntry => ({
  time: new Date().toISOString(),
  server: "relaykeep-tasks",
  tool,
  status: "ok",
  duration_ms: 1,
  arguments: { client_request_id: id, payload: payloadOf(id) },
  error: null
})

const auditLines = (auditDir: string) =>
  readdirSync(auditDir)
    .filter((name) => name.endsWith(".jsonl"))
    .reduce((sum, name) => sum + readFileSync(path.join(auditDir, name), "utf8").split("\n").length - 1, 0)

const perRoundTrip = (start: number) => (now() - start) / RoundTrips

export const mcpRoundtrip: Benchmark = {
  name: "mcp-roundtrip",
  title: `A submit then a read through the \`relaykeep-tasks\` MCP server over stdio (SDK client, stdio transport), ${RoundTrips} round trips per run, in milliseconds per round trip.`,
  baseline:
    "a bare MCP SDK server (McpServer, StdioServerTransport, zod arguments) whose submit writes a record of the same size with write, fsync, rename and a directory fsync, and whose read reads it back; same client, same transport",
  unit: "ms per round trip",
  // The issue asks for at most 1.5× (and aims at 1.3×).
  target: { kind: "at-most", subject: "relaykeep", baseline: "bare", max: 1.5 },
  setup: async ({ dir }) => {
    const root = path.join(dir, "root")
    const bareDir = path.join(dir, "bare")
    const storeRoot = path.join(dir, "store")
    const floorDir = path.join(dir, "floor")
    for (const made of [bareDir, floorDir]) mkdirSync(made)

    const relaykeep = await connect("relaykeep", [tasksBin, "--root", root])
    // One submit to learn the size of a record, which the bare server's records then match.
    const sizeProbe = requestId(-2, 0)
    const probe = Schema.decodeUnknownSync(Receipt)(
      await call(relaykeep, "submit", { client_request_id: sizeProbe, payload: payloadOf(sizeProbe) })
    )
    const recordFile = path.join(root, "tasks", `${probe.task_id}.json`)
    const recordBytes = statSync(recordFile).size
    const bare = await connect("bare", [
      "--import",
      "tsx",
      bareServer,
      "--dir",
      bareDir,
      "--record-bytes",
      String(recordBytes)
    ])

    const runtime = ManagedRuntime.make(
      Layer.mergeAll(fileTaskStoreLayer({ root: storeRoot }), auditLogLayer(path.join(dir, "audit"))).pipe(
        Layer.provide(Host.layer),
        Layer.provide(nodeContextLayer)
      )
    )
    const store = await runtime.runPromise(TaskStore)
    const audit = await runtime.runPromise(AuditLog)
    const recordBytesOf = readFileSync(recordFile)
    const auditDir = path.join(root, "audit")
    const gaps: Array<{ readonly server: number; readonly store: number; readonly audit: number }> = []

    return {
      run: async (index) => {
        const ids = Array.from({ length: RoundTrips }, (_, n) => requestId(index, n))

        let start = now()
        for (const id of ids) {
          const receipt = Schema.decodeUnknownSync(Receipt)(
            await call(relaykeep, "submit", { client_request_id: id, payload: payloadOf(id) })
          )
          const view = Schema.decodeUnknownSync(View)(await call(relaykeep, "read", receipt))
          if (view.task_id !== receipt.task_id || view.state !== "queued")
            throw new Error(`relaykeep read ${JSON.stringify(view)} for ${receipt.task_id}`)
        }
        const relaykeepMs = perRoundTrip(start)

        start = now()
        for (const id of ids) {
          const { task_id } = Schema.decodeUnknownSync(BareReceipt)(
            await call(bare, "submit", { client_request_id: id, payload: payloadOf(id) })
          )
          const record = Schema.decodeUnknownSync(BareRecord)(await call(bare, "read", { task_id }))
          if (record.client_request_id !== id)
            throw new Error(`bare read ${record.client_request_id} for ${id}`)
        }
        const bareMs = perRoundTrip(start)

        // The split: the store's submit and read in this process, against the floor's.
        start = now()
        for (const id of ids) {
          const receipt = await runtime.runPromise(
            store.submit({ clientRequestId: ClientRequestId.make(id), payload: payloadOf(id) })
          )
          await runtime.runPromise(store.read(receipt.task_id, receipt.payload_sha256))
        }
        const storeMs = perRoundTrip(start)

        start = now()
        for (const id of ids) {
          durableWrite(floorDir, `${id}.json`, recordBytesOf)
          readFileSync(path.join(floorDir, `${id}.json`))
        }
        const floorMs = perRoundTrip(start)

        // The audit entries of a round trip, as the pipeline appends them: the submit's fsynced,
        // the read's (a read-only call that succeeded) only written before its answer.
        start = now()
        for (const id of ids) {
          await runtime.runPromise(audit.append(auditEntryOf("submit", id)))
          await runtime.runPromise(audit.append(auditEntryOf("read", id), { durability: "written" }))
        }
        const auditMs = perRoundTrip(start)

        gaps.push({ server: relaykeepMs - bareMs, store: storeMs - floorMs, audit: auditMs })
        return { relaykeep: relaykeepMs, bare: bareMs, store: storeMs, floor: floorMs, audit: auditMs }
      },
      details: () => {
        const gap = median(gaps.map((g) => g.server))
        const storeGap = median(gaps.map((g) => g.store))
        const auditCost = median(gaps.map((g) => g.audit))
        const share = (part: number) =>
          `${Math.round((part / gap) * 100)}% (${Math.round(part * 1000) / 1000} ms)`
        return {
          round_trips_per_run: RoundTrips,
          record_bytes: recordBytes,
          // Each relaykeep call is audited before its answer goes back (SECURITY.md: the audit log).
          audit_entries: auditLines(auditDir),
          gap_ms: Math.round(gap * 1000) / 1000,
          store_share_of_gap: `${share(storeGap)}: store − floor, in process (rough on a busy machine)`,
          audit_share_of_gap: `${share(auditCost)}: two audit appends, in process (rough on a busy machine)`
        }
      },
      close: async () => {
        await Promise.allSettled([relaykeep.close(), bare.close()])
        await runtime.dispose()
      }
    }
  }
}
