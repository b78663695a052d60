import { Command, Options } from "@effect/cli"
import { Effect, Layer, Option } from "effect"
import { Host } from "../services/Host.js"
import { Provider } from "../services/Provider.js"
import { DefaultLeaseMillis, runPass } from "../worker/pass.js"
import { duration, resolveRoot, root, storeLayer } from "./options.js"
import { printJson } from "./output.js"
import type { ProviderArgs } from "./providerOptions.js"
import { providerOptions, resolveProviderSettings } from "./providerOptions.js"

const workerId = Options.text("worker-id").pipe(
  Options.withDescription("Names this worker in leases (default: host:pid)"),
  Options.optional
)
const lease = duration("lease", `${DefaultLeaseMillis / 1000}s`).pipe(
  Options.withDescription("Lease length; heartbeats extend it while a task runs (e.g. 60s, 5m)")
)

/** The providers as this worker's settings configure them, checked before any task is claimed. */
export const providerLayer = (args: ProviderArgs & { readonly root: Option.Option<string> }) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const settings = yield* resolveProviderSettings(args, yield* resolveRoot(args.root))
      return Provider.layer(settings)
    })
  )

export const worker = Command.make("worker", { root, workerId, lease, ...providerOptions }, (args) =>
  Effect.gen(function* () {
    const host = yield* Host
    const id = Option.getOrElse(args.workerId, () => `${host.hostname}:${host.pid}`)
    yield* printJson(yield* runPass({ workerId: id, leaseMillis: args.lease }))
  })
).pipe(
  Command.withDescription("Run one pass over the queue: claim and run each queued task, oldest first."),
  Command.provide((args) => Layer.merge(storeLayer(args.root), providerLayer(args)))
)
