/** tools/list of both servers: names, truthful annotations, schemas, and the instructions. */
import { assert, describe, it } from "@effect/vitest"
import * as path from "node:path"
import type { Session } from "../../support/mcpStdio.js"
import { useMcpTest } from "../../support/mcpStdio.js"

const mcp = useMcpTest()

interface Expected {
  readonly readOnly: boolean
  readonly idempotent: boolean
  readonly properties: ReadonlyArray<string>
  readonly required: ReadonlyArray<string>
  readonly outputRequired: ReadonlyArray<string>
}

const receiptKeys = ["created_at", "payload_sha256", "task_id"]
const viewKeys = [
  "attempt",
  "attempts",
  "cancel_requested_at",
  "client_request_id",
  "created_at",
  "error",
  "finished_at",
  "max_attempts",
  "not_before",
  "payload_sha256",
  "result",
  "started_at",
  "state",
  "task_id",
  "updated_at"
]

const taskTools: Record<string, Expected> = {
  submit: {
    readOnly: false,
    idempotent: true,
    properties: ["client_request_id", "payload"],
    required: ["client_request_id", "payload"],
    outputRequired: receiptKeys
  },
  read: {
    readOnly: true,
    idempotent: true,
    properties: ["payload_sha256", "task_id", "wait_seconds"],
    required: ["payload_sha256", "task_id"],
    outputRequired: viewKeys
  },
  cancel: {
    readOnly: false,
    idempotent: true,
    properties: ["payload_sha256", "task_id"],
    required: ["payload_sha256", "task_id"],
    outputRequired: ["cancel_requested", "cancelled", "state", "task_id"]
  },
  list: {
    readOnly: true,
    idempotent: true,
    properties: ["cursor", "limit", "state"],
    required: [],
    outputRequired: ["next_cursor", "tasks"]
  },
  broadcast: {
    readOnly: false,
    idempotent: true,
    properties: ["client_request_id", "payload", "targets"],
    required: ["client_request_id", "payload", "targets"],
    outputRequired: ["created_at", "group_id", "members", "payload_sha256"]
  },
  read_group: {
    readOnly: true,
    idempotent: true,
    properties: ["group_id", "payload_sha256", "wait_seconds"],
    required: ["group_id", "payload_sha256"],
    outputRequired: [
      "client_request_id",
      "counts",
      "created_at",
      "group_id",
      "members",
      "payload_sha256",
      "state"
    ]
  }
}

const memoryTools: Record<string, Expected> = {
  search: {
    readOnly: true,
    idempotent: true,
    properties: ["limit", "query"],
    required: ["query"],
    outputRequired: ["hits"]
  },
  read: { readOnly: true, idempotent: true, properties: ["id"], required: ["id"], outputRequired: ["record"] }
}

const sorted = (values: ReadonlyArray<string> | undefined) => [...(values ?? [])].sort()

const checkTools = async (session: Session, expected: Record<string, Expected>) => {
  const { tools } = await session.client.listTools()
  assert.deepStrictEqual(
    tools.map((tool) => tool.name),
    Object.keys(expected)
  )
  for (const tool of tools) {
    const want = expected[tool.name]
    assert.isDefined(want, tool.name)
    if (want === undefined) continue
    assert.deepStrictEqual(
      tool.annotations,
      {
        readOnlyHint: want.readOnly,
        destructiveHint: false,
        idempotentHint: want.idempotent,
        openWorldHint: false
      },
      `${tool.name} annotations`
    )
    assert.isAbove((tool.description ?? "").length, 20, `${tool.name} has a description`)
    assert.strictEqual(tool.inputSchema.type, "object")
    assert.deepStrictEqual(sorted(Object.keys(tool.inputSchema.properties ?? {})), sorted(want.properties))
    assert.deepStrictEqual(sorted(tool.inputSchema.required), sorted(want.required), `${tool.name} required`)
    assert.strictEqual(tool.inputSchema["additionalProperties"], false, `${tool.name} rejects unknown keys`)
    assert.isDefined(tool.outputSchema, `${tool.name} outputSchema`)
    assert.strictEqual(tool.outputSchema?.type, "object")
    assert.deepStrictEqual(sorted(tool.outputSchema?.required), sorted(want.outputRequired))
  }
}

describe("tools/list", () => {
  it("relaykeep-tasks: submit, read, cancel, list, broadcast, read_group with truthful hints and schemas", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    await checkTools(session, taskTools)
    const version = session.client.getServerVersion()
    assert.strictEqual(version?.name, "relaykeep-tasks")
  })

  it("relaykeep-memory: search and read, both read-only", async () => {
    const dir = mcp.tempDir()
    const session = await mcp.memory(path.join(dir, "memory.jsonl"), path.join(dir, "root"))
    await checkTools(session, memoryTools)
    assert.strictEqual(session.client.getServerVersion()?.name, "relaykeep-memory")
  })

  it("relaykeep-tasks instructions state the rules, in under 512 characters", async () => {
    const session = await mcp.tasks(mcp.tempDir())
    const instructions = session.client.getInstructions() ?? ""
    assert.isAbove(instructions.length, 0)
    assert.isBelow(instructions.length, 512)
    assert.match(instructions, /queued, not done/)
    assert.match(instructions, /same client_request_id and payload/)
    assert.match(instructions, /[Nn]ever resubmit under a new id/)
  })

  it("relaykeep-memory instructions are present, in under 512 characters", async () => {
    const dir = mcp.tempDir()
    const session = await mcp.memory(path.join(dir, "memory.jsonl"), path.join(dir, "root"))
    const instructions = session.client.getInstructions() ?? ""
    assert.isAbove(instructions.length, 0)
    assert.isBelow(instructions.length, 512)
  })
})
