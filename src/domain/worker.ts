/**
 * What a watching worker says about itself while it runs: the worker registry that the
 * dashboard's health route reads. Unlike a task record this is a hint, not acknowledged data:
 * a worker rewrites it every few seconds, and one that stops announcing (killed, frozen, its
 * machine gone) shows as late once `expires_at` passes, and is pruned an hour after that.
 */
import { Order, Schema } from "effect"
import { Timestamp, timeMillis } from "./time.js"

/** One run of a worker process: random, so two processes given the same `--worker-id` differ. */
export const WorkerInstance = Schema.String.pipe(
  Schema.pattern(/^[0-9a-f]{32}$/, { message: () => "must be 32 lowercase hex digits" })
)

/**
 * The longest worker id the registry keeps (`--worker-id` refuses longer ones). Room for the
 * default, `host:pid`, with the longest host name `RELAYKEEP_HOST` accepts (255).
 */
export const MaxWorkerIdLength = 512

export const WorkerStatus = Schema.Literal("watching", "stopping")
export type WorkerStatus = typeof WorkerStatus.Type

export const WorkerPresence = Schema.Struct({
  instance: WorkerInstance,
  /** The name its leases carry (`--worker-id`, or host:pid). */
  worker_id: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(MaxWorkerIdLength)),
  hostname: Schema.String,
  pid: Schema.Int,
  /** The relaykeep version the worker runs. */
  version: Schema.String,
  /** `stopping` from the first stop signal until its running attempts have ended. */
  status: WorkerStatus,
  started_at: Timestamp,
  /** Its last heartbeat. */
  seen_at: Timestamp,
  /** When it counts as late if no heartbeat came: a few heartbeat intervals after `seen_at`. */
  expires_at: Timestamp,
  concurrency: Schema.Int.pipe(Schema.positive()),
  /** Attempts it was running at its last heartbeat. */
  running: Schema.Int.pipe(Schema.nonNegative())
})
export type WorkerPresence = typeof WorkerPresence.Type

/** How long past its expiry a silent worker stays listed (as late) before a start prunes it. */
export const LateWorkerKeptMillis = 60 * 60 * 1000

/** Whether `presence` missed its heartbeat at `now`. */
export const isLate = (presence: WorkerPresence, now: number): boolean =>
  timeMillis(presence.expires_at) <= now

/** Listing order: by worker id, then by start. */
export const presenceOrder: Order.Order<WorkerPresence> = Order.combineAll([
  Order.mapInput(Order.string, (presence: WorkerPresence) => presence.worker_id),
  Order.mapInput(Order.string, (presence: WorkerPresence) => presence.started_at),
  Order.mapInput(Order.string, (presence: WorkerPresence) => presence.instance)
])

/**
 * As stored. Not checked on the way in: an entry a library caller filled wrongly (an empty
 * worker id, say) is then left out by `decodePresence` and pruned, rather than failing the
 * worker that wrote it.
 */
export const encodePresence = (presence: WorkerPresence): string => JSON.stringify(presence)
export const isWorkerPresence = Schema.is(WorkerPresence)
export const decodePresence = Schema.decodeUnknownEither(Schema.parseJson(WorkerPresence))
