/**
 * The workers of a queue as people see them (`relaykeep workers`, the dashboard's health): the
 * store's worker registry (each watching worker's last heartbeat) joined with the leases of
 * running tasks, so that an idle worker shows, and so does one that holds tasks without
 * announcing itself (a one-shot `relaykeep worker` pass, or a worker of an older version).
 */
import { Clock, Effect, Either, Order, Schema } from "effect"
import type { RecordHead } from "../domain/Task.js"
import { timeMillis } from "../domain/time.js"
import type { WorkerPresence } from "../domain/worker.js"
import { isLate, LateWorkerKeptMillis } from "../domain/worker.js"
import { TaskStore } from "../services/TaskStore.js"

/** `late`: its heartbeat is overdue (killed, frozen, or its machine is gone). */
export const WorkerState = Schema.Literal("watching", "stopping", "late", "unannounced")

/** One worker as `relaykeep workers` and the dashboard's health show it. */
export const WorkerView = Schema.Struct({
  worker_id: Schema.String,
  /** The registry entry's run id; null for a worker seen only through leases. */
  instance: Schema.NullOr(Schema.String),
  hostname: Schema.String,
  pid: Schema.Int,
  state: WorkerState,
  version: Schema.NullOr(Schema.String),
  started_at: Schema.NullOr(Schema.String),
  /** Its last heartbeat, and when the next was due at the latest. */
  last_heartbeat_at: Schema.NullOr(Schema.String),
  heartbeat_expires_at: Schema.NullOr(Schema.String),
  concurrency: Schema.NullOr(Schema.Int),
  /** The running tasks whose lease it holds. */
  running: Schema.Array(Schema.String),
  /** The latest expiry among those leases (each heartbeat of an attempt extends its lease). */
  lease_expires_at: Schema.NullOr(Schema.String)
})
export type WorkerView = typeof WorkerView.Type

/** Workers seen only through leases: by worker id, then pid. */
const unannouncedOrder: Order.Order<WorkerView> = Order.combine(
  Order.mapInput(Order.string, (view: WorkerView) => view.worker_id),
  Order.mapInput(Order.number, (view: WorkerView) => view.pid)
)

/** Who holds a lease: the same name, host and process. */
const holderKey = (workerId: string, host: string, pid: number) => JSON.stringify([workerId, host, pid])

/**
 * Whose leases a holder's are, when several entries share its worker id, host and pid (a
 * restarted container reusing both, a `--worker-id` meeting a reused pid): the run that is not
 * late, else the one that started last.
 */
const ownsBefore = (a: WorkerPresence, b: WorkerPresence, now: number): boolean =>
  isLate(a, now) !== isLate(b, now) ? !isLate(a, now) : a.started_at > b.started_at

export const workersView = (
  registered: ReadonlyArray<WorkerPresence>,
  running: ReadonlyArray<RecordHead>,
  now: number
): ReadonlyArray<WorkerView> => {
  const leases = new Map<
    string,
    { tasks: Array<string>; expires: string; lease: NonNullable<RecordHead["lease"]> }
  >()
  for (const record of running) {
    const lease = record.lease
    if (lease === null) continue
    const key = holderKey(lease.worker_id, lease.host, lease.pid)
    const held = leases.get(key)
    if (held === undefined) leases.set(key, { tasks: [record.task_id], expires: lease.expires_at, lease })
    else {
      held.tasks.push(record.task_id)
      if (lease.expires_at > held.expires) held.expires = lease.expires_at
    }
  }
  // Entries silent for over an hour are left out even before a worker's start prunes them.
  const shown = registered.filter((presence) => timeMillis(presence.expires_at) + LateWorkerKeptMillis > now)
  const owners = new Map<string, WorkerPresence>()
  for (const presence of shown) {
    const key = holderKey(presence.worker_id, presence.hostname, presence.pid)
    const other = owners.get(key)
    if (other === undefined || ownsBefore(presence, other, now)) owners.set(key, presence)
  }
  const announced = shown.map((presence): WorkerView => {
    const key = holderKey(presence.worker_id, presence.hostname, presence.pid)
    const held = owners.get(key) === presence ? leases.get(key) : undefined
    return {
      worker_id: presence.worker_id,
      instance: presence.instance,
      hostname: presence.hostname,
      pid: presence.pid,
      state: isLate(presence, now) ? "late" : presence.status,
      version: presence.version,
      started_at: presence.started_at,
      last_heartbeat_at: presence.seen_at,
      heartbeat_expires_at: presence.expires_at,
      concurrency: presence.concurrency,
      running: held?.tasks ?? [],
      lease_expires_at: held?.expires ?? null
    }
  })
  const unannounced = [...leases]
    .filter(([key]) => !owners.has(key))
    .map(([, { tasks, expires, lease }]): WorkerView => ({
      worker_id: lease.worker_id,
      instance: null,
      hostname: lease.host,
      pid: lease.pid,
      state: "unannounced",
      version: null,
      started_at: null,
      last_heartbeat_at: null,
      heartbeat_expires_at: null,
      concurrency: null,
      running: tasks,
      lease_expires_at: expires
    }))
    .sort(unannouncedOrder)
  return [...announced, ...unannounced]
}

/** Read the registry and the running tasks, and join them as of now. */
export const currentWorkers = Effect.gen(function* () {
  const store = yield* TaskStore
  // Only the lease holders are joined: `running`, not the whole live queue.
  const [registered, held] = yield* Effect.all([store.workers.list, store.running], { concurrency: 2 })
  return workersView(registered, held.running, yield* Clock.currentTimeMillis)
})

/**
 * As `currentWorkers` for a page that must show something: a registry that cannot be read (a
 * database role without rights on its table, say) leaves the lease holders, and the reason.
 */
export const workersOrLeases = Effect.gen(function* () {
  const store = yield* TaskStore
  const [listed, held] = yield* Effect.all([Effect.either(store.workers.list), store.running], {
    concurrency: 2
  })
  return {
    workers: workersView(
      Either.getOrElse(listed, () => []),
      held.running,
      yield* Clock.currentTimeMillis
    ),
    registry_error: Either.isLeft(listed) ? listed.left.message : null
  }
})
