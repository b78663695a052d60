/**
 * The client configurations in the README, run as a client would run them: each block's
 * command and arguments, with the placeholders replaced by this checkout and a temp root.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Schema } from "effect"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

const repo = resolve(import.meta.dirname, "..", "..", "..")
const readme = readFileSync(join(repo, "README.md"), "utf8")

const block = (language: string, containing: string): string => {
  const found = [...readme.matchAll(new RegExp("```" + language + "\\n([\\s\\S]*?)```", "g"))]
    .map((match) => match[1] ?? "")
    .find((text) => text.includes(containing))
  if (found === undefined) throw new Error(`no ${language} block with ${containing} in the README`)
  return found
}

const McpServers = Schema.parseJson(
  Schema.Struct({
    mcpServers: Schema.Record({
      key: Schema.String,
      value: Schema.Struct({ command: Schema.String, args: Schema.Array(Schema.String) })
    })
  })
)

/** Start a configured server and list its tools, as a client would. */
const toolsOf = async (command: string, args: ReadonlyArray<string>): Promise<ReadonlyArray<string>> => {
  const client = new Client({ name: "readme-check", version: "1" })
  await client.connect(new StdioClientTransport({ command, args: [...args], stderr: "ignore" }))
  try {
    return (await client.listTools()).tools.map((tool) => tool.name)
  } finally {
    await client.close()
  }
}

/** The tools relaykeep-tasks lists, in order. */
const TasksTools = ["submit", "read", "cancel", "list", "broadcast", "read_group"]

describe("README client configurations", () => {
  const data = mkdtempSync(join(tmpdir(), "relaykeep-readme-"))
  const fill = (text: string) =>
    text
      .replaceAll("/absolute/path/to/relaykeep-data", data)
      .replaceAll("/absolute/path/to/relaykeep", repo)
      .replaceAll("/absolute/path/to/memory.jsonl", join(data, "memory.jsonl"))

  it("the mcpServers JSON starts both servers", async () => {
    const config = Schema.decodeUnknownSync(McpServers)(fill(block("json", "mcpServers")))
    const tasks = config.mcpServers["relaykeep-tasks"]
    const memory = config.mcpServers["relaykeep-memory"]
    assert.isDefined(tasks)
    assert.isDefined(memory)
    if (!tasks || !memory) return
    assert.deepStrictEqual(await toolsOf(tasks.command, tasks.args), TasksTools)
    assert.deepStrictEqual(await toolsOf(memory.command, memory.args), ["search", "read"])
  })

  it("the Codex TOML and the claude mcp add line start the tasks server", async () => {
    const toml = fill(block("toml", "mcp_servers.relaykeep-tasks"))
    const command = /^command = "(.*)"$/m.exec(toml)?.[1]
    const args = Schema.decodeUnknownSync(Schema.parseJson(Schema.Array(Schema.String)))(
      /^args = (\[.*\])$/m.exec(toml)?.[1] ?? "null"
    )
    assert.match(toml, /^tool_timeout_sec = \d+$/m)
    assert.isDefined(command)
    assert.deepStrictEqual(await toolsOf(command ?? "", args), TasksTools)

    const line = fill(block("bash", "claude mcp add")).trim()
    const [, afterDashes = ""] = line.split(" -- ")
    const [claudeCommand = "", ...claudeArgs] = afterDashes.split(" ")
    assert.deepStrictEqual(await toolsOf(claudeCommand, claudeArgs), TasksTools)
  })

  afterAll(() => rmSync(data, { recursive: true, force: true }))
})
