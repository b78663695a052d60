/**
 * `makeTaskStore`: the TaskStore port built once from a store's narrow backend, as
 * `FileSystem.make` builds a file system from a few primitives in @effect/platform.
 *
 * A backend says how to keep records (load one, insert one unless its task exists, apply a
 * step to one atomically, claim the oldest ready ones, scan), how it signals (wake-ups,
 * changes) and where its worker registry lives. Everything that gives the operations their
 * meaning is written here once, over the pure transitions of `domain/transitions.ts`: the
 * payload checks and the idempotent receipt of `submit`, the hash check of `read` and `cancel`,
 * every fenced transition of a running attempt, what `check` reports and how a page is cut.
 * A store may override `list` and `counts` where it can answer them cheaper than by a scan
 * (PostgreSQL pages and counts in SQL), never with another meaning: the contract suite
 * (`test/contract/`) holds every store to the same answers.
 */
import { Clock, Effect, Option } from "effect"
import type { Stream } from "effect"
import type { InvalidInput, InvalidRecord, StorageError } from "../domain/errors.js"
import { UnknownTask } from "../domain/errors.js"
import type { ClientRequestId, TaskId } from "../domain/ids.js"
import type { CollectedTask, FinishedState } from "../domain/retention.js"
import { checkCollectRequest, chooseCollectable } from "../domain/retention.js"
import { checkTtl, DefaultMaxPayloadBytes, preparePayload } from "../domain/submission.js"
import type { InvalidRecordReport, RecordHead, TaskRecord, TaskState } from "../domain/Task.js"
import { headOf, toReceipt, toView } from "../domain/Task.js"
import * as Transitions from "../domain/transitions.js"
import type { Host } from "../services/Host.js"
import type { ListRequest, TaskPage, TaskStoreShape, WorkerRegistry } from "../services/TaskStore.js"
import type { ApplyStep } from "./shared.js"
import { countStates, pageOf, transitionOperations } from "./shared.js"

/** Every record a scan found, and the damaged ones it met. */
export interface ScanResult {
  readonly records: ReadonlyArray<TaskRecord>
  readonly invalid: ReadonlyArray<InvalidRecordReport>
}

/** Picks, among records (any states), the finished ones a collection removes. */
export type ChooseCollectable = <H extends RecordHead>(
  heads: ReadonlyArray<H>
) => ReadonlyArray<H & { readonly state: FinishedState }>

/** What a backend's collection removed, and the damaged records it met. */
export interface Collected {
  readonly removed: ReadonlyArray<CollectedTask>
  readonly invalid: ReadonlyArray<InvalidRecordReport>
}

/** What a store must provide; `makeTaskStore` builds the rest. */
export interface TaskStoreBackend {
  /** The task id of a request id: the keyed hash under this store's secret. */
  readonly taskIdFor: (clientRequestId: ClientRequestId) => Effect.Effect<TaskId, StorageError>
  /** The record of a task, None when there is none, InvalidRecord when it is damaged. No side effects. */
  readonly load: (taskId: TaskId) => Effect.Effect<Option.Option<TaskRecord>, InvalidRecord | StorageError>
  /** `load` without the payload, when the store can read less; default: `load`. */
  readonly loadHead?:
    ((taskId: TaskId) => Effect.Effect<Option.Option<RecordHead>, InvalidRecord | StorageError>) | undefined
  /**
   * Store `record` durably unless a record of its task exists, atomically: None once it is
   * stored, or the record that was there (which is left unchanged).
   */
  readonly insertIfAbsent: (
    record: TaskRecord
  ) => Effect.Effect<Option.Option<TaskRecord>, InvalidRecord | StorageError>
  /** Apply one step to one record atomically, fenced as the store can (see `ApplyStep`). */
  readonly apply: ApplyStep<UnknownTask | InvalidRecord | StorageError>
  readonly claimNext: TaskStoreShape["claimNext"]
  readonly running: TaskStoreShape["running"]
  readonly live: TaskStoreShape["live"]
  /** Every record, decoded or reported damaged: O(all tasks), for `check` and a default `list`. */
  readonly scan: Effect.Effect<ScanResult, StorageError>
  readonly wakeups: Stream.Stream<void>
  readonly changes: Stream.Stream<TaskId>
  readonly workers: WorkerRegistry
  /** A cheaper `list` with the same answers; default: a page of the scan. */
  readonly list?: ((request: ListRequest) => Effect.Effect<TaskPage, InvalidInput | StorageError>) | undefined
  /** A cheaper count per state; default: the states `check` counts. */
  readonly counts?: Effect.Effect<Readonly<Record<TaskState, number>>, StorageError> | undefined
  /**
   * Remove the records `choose` picks from every record, each under the store's guard and only
   * while it is still the record chosen (`stillCollectable`: a late outcome written meanwhile
   * leaves it for the next collection), with its index entries; durable before it returns.
   * Damaged records are reported, never removed. With `dryRun`, nothing is removed.
   */
  readonly collect: (choose: ChooseCollectable, dryRun: boolean) => Effect.Effect<Collected, StorageError>
}

export interface MakeTaskStoreOptions {
  /** The largest payload accepted, as canonical JSON bytes. */
  readonly maxPayloadBytes?: number | undefined
}

const oldestFinishedFirst = (a: CollectedTask, b: CollectedTask): number =>
  a.finished_at < b.finished_at ? -1 : a.finished_at > b.finished_at ? 1 : a.task_id < b.task_id ? -1 : 1

/** The TaskStore port over `backend`. */
export const makeTaskStore = (
  host: Host["Type"],
  backend: TaskStoreBackend,
  options: MakeTaskStoreOptions = {}
): TaskStoreShape => {
  const maxPayloadBytes = options.maxPayloadBytes ?? DefaultMaxPayloadBytes

  const loadExisting = (taskId: TaskId) =>
    Effect.flatMap(backend.load(taskId), (record) =>
      Option.isSome(record) ? Effect.succeed(record.value) : Effect.fail(new UnknownTask({ taskId }))
    )

  const check: TaskStoreShape["check"] = Effect.map(backend.scan, ({ records, invalid }) => {
    return {
      records: records.length + invalid.length,
      states: countStates(records),
      invalid_records: invalid
    }
  }).pipe(Effect.withSpan("TaskStore.check"))

  return {
    ...transitionOperations(host, backend.apply),
    submit: Effect.fn("TaskStore.submit")(function* (request) {
      // Checked before the store is touched: bad input changes nothing and opens nothing.
      const prepared = yield* preparePayload(request.payload, maxPayloadBytes)
      const ttlMillis = yield* checkTtl(request.ttlMillis)
      const taskId = yield* backend.taskIdFor(request.clientRequestId)
      const record = Transitions.newRecord({
        taskId,
        clientRequestId: request.clientRequestId,
        payload: request.payload,
        payloadSha256: prepared.sha,
        now: yield* Clock.currentTimeMillis,
        ttlMillis
      })
      const existing = yield* backend.insertIfAbsent(record)
      return Option.isSome(existing)
        ? yield* Transitions.resubmit(existing.value, prepared.sha)
        : toReceipt(record)
    }),
    record: Effect.fn("TaskStore.record")((taskId: TaskId) => loadExisting(taskId)),
    peek: Effect.fn("TaskStore.peek")((taskId: TaskId) =>
      Effect.flatMap(
        backend.loadHead?.(taskId) ?? Effect.map(backend.load(taskId), Option.map(headOf)),
        (head) =>
          Option.isSome(head) ? Effect.succeed(head.value) : Effect.fail(new UnknownTask({ taskId }))
      )
    ),
    read: Effect.fn("TaskStore.read")(function* (taskId: TaskId, sha: string) {
      const record = yield* loadExisting(taskId)
      return toView(yield* Transitions.checkHash(record, sha))
    }),
    live: backend.live,
    claimNext: backend.claimNext,
    running: backend.running,
    wakeups: backend.wakeups,
    changes: backend.changes,
    list:
      backend.list ??
      Effect.fn("TaskStore.list")(function* (request: ListRequest) {
        const { records } = yield* backend.scan
        return yield* pageOf(records, request)
      }),
    check,
    counts:
      backend.counts ??
      Effect.map(check, (report) => report.states).pipe(Effect.withSpan("TaskStore.counts")),
    collect: Effect.fn("TaskStore.collect")(function* (request) {
      // Checked before the store is touched: bad input removes nothing and opens nothing.
      const checked = yield* checkCollectRequest(request)
      const now = yield* Clock.currentTimeMillis
      const dryRun = checked.dryRun === true
      const { removed, invalid } = yield* backend.collect(
        (heads) => chooseCollectable(heads, checked, now),
        dryRun
      )
      return { removed: [...removed].sort(oldestFinishedFirst), invalid, dry_run: dryRun }
    }),
    workers: backend.workers
  }
}
