import { Command, Options } from "@effect/cli"
import { Effect, Option } from "effect"
import { Host } from "../services/Host.js"
import { DefaultLeaseMillis, runPass } from "../worker/pass.js"
import { duration, root, storeLayer } from "./options.js"
import { printJson } from "./output.js"

const workerId = Options.text("worker-id").pipe(
  Options.withDescription("Names this worker in leases (default: host:pid)"),
  Options.optional
)
const lease = duration("lease", `${DefaultLeaseMillis / 1000}s`).pipe(
  Options.withDescription("Lease length; heartbeats extend it while a task runs (e.g. 60s, 5m)")
)

export const worker = Command.make("worker", { root, workerId, lease }, (args) =>
  Effect.gen(function* () {
    const host = yield* Host
    const id = Option.getOrElse(args.workerId, () => `${host.hostname}:${host.pid}`)
    yield* printJson(yield* runPass({ workerId: id, leaseMillis: args.lease }))
  })
).pipe(
  Command.withDescription("Run one pass over the queue: claim and run each queued task, oldest first."),
  Command.provide((args) => storeLayer(args.root))
)
