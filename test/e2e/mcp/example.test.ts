/** examples/notes-server.mjs over a real stdio transport: tiers, allowlist, elicitation, audit. */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

const repo = resolve(import.meta.dirname, "..", "..", "..")
const dirs: Array<string> = []
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })))

/** Start the example; `answer` makes the client elicitation-capable and answers every request. */
const connect = async (args: ReadonlyArray<string>, answer?: "accept" | "decline") => {
  const audit = mkdtempSync(join(tmpdir(), "relaykeep-example-"))
  dirs.push(audit)
  const client = new Client(
    { name: "example-test", version: "1" },
    { capabilities: answer === undefined ? {} : { elicitation: {} } }
  )
  if (answer !== undefined) {
    client.setRequestHandler(ElicitRequestSchema, () =>
      Promise.resolve(
        answer === "accept" ? { action: "accept", content: { allow: true } } : { action: "decline" }
      )
    )
  }
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [join(repo, "examples", "notes-server.mjs"), "--audit-dir", audit, ...args],
      cwd: repo,
      stderr: "ignore"
    })
  )
  return { client, audit }
}

const text = (result: unknown): string => {
  const content =
    typeof result === "object" && result !== null && "content" in result ? result.content : undefined
  if (!Array.isArray(content)) return ""
  const first: unknown = content[0]
  return typeof first === "object" && first !== null && "text" in first && typeof first.text === "string"
    ? first.text
    : ""
}

const statuses = (audit: string): Array<string> =>
  readdirSync(audit)
    .filter((name) => name.endsWith(".jsonl"))
    .flatMap((name) => readFileSync(join(audit, name), "utf8").trim().split("\n"))
    .map((line) => /"status":"(\w+)"/.exec(line)?.[1] ?? "?")

describe("examples/notes-server.mjs", () => {
  it("runs write tools, denies the destructive one unless allowed, and audits each call", async () => {
    const { client, audit } = await connect([])
    try {
      assert.strictEqual(
        text(await client.callTool({ name: "add_note", arguments: { text: "one" } })),
        '{"notes":["one"]}'
      )
      const denied = await client.callTool({ name: "clear_notes", arguments: {} })
      assert.isTrue(denied.isError)
      assert.match(text(denied), /^PermissionDenied: clear_notes was not allowed/)
      const invalid = await client.callTool({ name: "clear_notes", arguments: { everything: true } })
      assert.match(text(invalid), /^InvalidArguments: everything/)
      assert.deepStrictEqual(statuses(audit), ["ok", "denied", "invalid"])
    } finally {
      await client.close()
    }
  })

  it("runs the destructive tool when allowlisted", async () => {
    const { client } = await connect(["--allow", "clear_notes"])
    try {
      assert.strictEqual(text(await client.callTool({ name: "clear_notes", arguments: {} })), '{"notes":[]}')
    } finally {
      await client.close()
    }
  })

  it("asks through elicitation: accepted runs, declined and incapable clients are denied", async () => {
    for (const [answer, expected] of [
      ["accept", /^\{"notes":\[\]\}$/],
      ["decline", /^PermissionDenied: .*declined by the user/],
      [undefined, /^PermissionDenied: .*cannot ask for confirmation/]
    ] as const) {
      const { client } = await connect(["--confirm-with-elicitation"], answer)
      try {
        assert.match(text(await client.callTool({ name: "clear_notes", arguments: {} })), expected)
      } finally {
        await client.close()
      }
    }
  })
})
