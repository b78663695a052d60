// A small audited MCP server built on RelayKeep's tool pipeline: a read-only tool, a write
// tool and a destructive one. Destructive calls are denied unless allowed by name, or
// confirmed by the person at the client through MCP elicitation:
//
//   node examples/notes-server.mjs --audit-dir ./audit --allow clear_notes
//   node examples/notes-server.mjs --audit-dir ./audit --confirm-with-elicitation
//
// Every call is validated, permitted, run under its timeout and written, redacted, to the
// audit directory as JSONL. stdout carries JSON-RPC only; logs go to stderr.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Logger, Ref, Schema } from "effect"
import {
  allowlistPolicyLayer,
  auditLogLayer,
  defineTool,
  elicitationPolicyLayer,
  Host,
  nodeContextLayer,
  serveStdio
} from "relaykeep"

const option = (name) => process.argv.flatMap((arg, i) => (process.argv[i - 1] === name ? [arg] : []))

const notes = Ref.unsafeMake([])
const Notes = Schema.Struct({ notes: Schema.Array(Schema.String) })

const tools = [
  defineTool({
    name: "list_notes",
    description: "List the notes.",
    input: Schema.Struct({}),
    output: Notes,
    tier: "read_only",
    handler: () => Effect.map(Ref.get(notes), (all) => ({ notes: all }))
  }),
  defineTool({
    name: "add_note",
    description: "Add a note.",
    input: Schema.Struct({ text: Schema.NonEmptyString }),
    output: Notes,
    tier: "write",
    timeout: "2 seconds",
    handler: ({ text }) =>
      Effect.map(
        Ref.updateAndGet(notes, (all) => [...all, text]),
        (all) => ({ notes: all })
      )
  }),
  defineTool({
    name: "clear_notes",
    description: "Delete every note.",
    input: Schema.Struct({}),
    output: Notes,
    tier: "destructive",
    handler: () => Effect.as(Ref.set(notes, []), { notes: [] })
  })
]

const live = Layer.mergeAll(
  auditLogLayer(option("--audit-dir")[0] ?? "audit"),
  process.argv.includes("--confirm-with-elicitation")
    ? elicitationPolicyLayer
    : allowlistPolicyLayer(option("--allow")),
  Logger.replace(Logger.defaultLogger, Logger.prettyLogger({ stderr: true }))
).pipe(Layer.provide(Host.layer), Layer.provideMerge(nodeContextLayer))

serveStdio({ name: "notes", version: "1.0.0", instructions: "A scratchpad of notes.", tools }).pipe(
  Effect.provide(live),
  NodeRuntime.runMain
)
