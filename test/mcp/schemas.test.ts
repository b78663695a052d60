/** Every advertised schema compiles in Ajv, the validator MCP SDK clients use on tools/list. */
import { assert, describe, it } from "@effect/vitest"
import { Ajv } from "ajv"
import { memoryTools } from "../../src/mcp/memory/tools.js"
import { describeTool } from "../../src/mcp/server.js"
import { taskTools } from "../../src/mcp/tasks/tools.js"

describe("advertised JSON Schemas", () => {
  const described = [...taskTools.map(describeTool), ...memoryTools.map(describeTool)]

  for (const tool of described) {
    it(`${tool.name}: input and output schemas compile together in one Ajv instance`, () => {
      const ajv = new Ajv({ strict: false })
      assert.doesNotThrow(() => ajv.compile(tool.inputSchema))
      assert.doesNotThrow(() => ajv.compile(tool.outputSchema))
      assert.notInclude(JSON.stringify(tool.inputSchema) + JSON.stringify(tool.outputSchema), '"$id"')
    })
  }

  it("the read tool's output accepts a real task view with a receipt", () => {
    const read = described.find(
      (tool) => tool.name === "read" && JSON.stringify(tool.inputSchema).includes("wait_seconds")
    )
    assert.isDefined(read)
    const validate = new Ajv({ strict: false }).compile(read?.outputSchema ?? {})
    const at = "2026-11-30T00:00:00.000Z"
    const receipt = {
      provider: "claude",
      requested_model: "m",
      model: null,
      model_evidence: { verified: false, source: "s", model_usage: { x: 1 } },
      started_at: at,
      ended_at: at,
      duration_ms: 1,
      exit_code: 0,
      http_status: null,
      usage: { input_tokens: 1 },
      cost_usd: null,
      output_sha256: "a",
      output_bytes: 1
    }
    const view = {
      task_id: "a".repeat(64),
      client_request_id: "r",
      payload_sha256: "b".repeat(64),
      state: "complete",
      result: { any: ["json"] },
      error: null,
      created_at: at,
      updated_at: at,
      started_at: at,
      finished_at: at,
      attempt: 1,
      max_attempts: 1,
      not_before: null,
      cancel_requested_at: null,
      attempts: [
        {
          attempt: 1,
          worker_id: "w",
          pid: 1,
          host: "h",
          started_at: at,
          ended_at: at,
          outcome: "complete",
          error: null,
          receipt
        }
      ]
    }
    assert.isTrue(validate(view), JSON.stringify(validate.errors))
  })
})
