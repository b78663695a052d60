/**
 * The file store: the default, embedded TaskStore (docs/file-store.md).
 *
 * Every change of a record happens under the task's lock as read → transition → durable
 * write, and index markers follow the marker invariant: a marker is created before a record
 * enters a live state and removed only after it has left one.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Effect, Either, Option, Stream } from "effect"
import type { InvalidRecord, StorageError } from "../../domain/errors.js"
import { UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import type { InvalidRecordReport, TaskRecord } from "../../domain/Task.js"
import { isTerminal, submissionOrder } from "../../domain/Task.js"
import * as Transitions from "../../domain/transitions.js"
import { Host } from "../../services/Host.js"
import { Lock, lockTimeoutAsStorageError } from "../../services/Lock.js"
import type { TaskStoreShape } from "../../services/TaskStore.js"
import type { TaskStoreBackend } from "../make.js"
import { makeTaskStore } from "../make.js"
import { onceSuccessful, pageOf, readiness, transitionOperations } from "../shared.js"
import {
  listDirectory,
  readIfExists,
  removeIfExists,
  tempName,
  touch,
  writeDurable
} from "../../platform/durable.js"
import { layoutOf, taskIdOfQueuedMarker, taskIdOfRecordFile } from "./layout.js"
import { encodeRecord, decodeRecordFile } from "./records.js"
import { ensureLayout, loadSecret, reconcileAfterBoot, sweepTempFiles } from "./recovery.js"
import { scanRecords } from "./scan.js"
import { checkRoot } from "../../platform/trust.js"
import { fileWorkerRegistry } from "./workers.js"
import { queueHead } from "./queueHead.js"

export interface FileStoreOptions {
  /** The data root; created 0700 if missing. */
  readonly root: string
  readonly maxPayloadBytes?: number
}

export const makeFileTaskStore = (options: FileStoreOptions) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const host = yield* Host
    const lock = yield* Lock
    const layout = layoutOf(path, path.resolve(options.root))
    const deps = { fs, path, host, lock, layout }

    /**
     * The root is opened on the first operation, not when the layer is built. Opening checks
     * that no other user can write the root, creates the layout, loads the secret, reconciles
     * after a reboot and sweeps dead writers' temp files.
     */
    const openRoot: Effect.Effect<Uint8Array, StorageError> = yield* onceSuccessful(
      Effect.gen(function* () {
        // Before anything is read or created: a root another user can write is refused.
        yield* checkRoot({ fs, path, uid: host.uid }, layout.root, layout.private)
        yield* ensureLayout(deps)
        const secret = yield* loadSecret(deps)
        yield* lockTimeoutAsStorageError(reconcileAfterBoot(deps, secret))
        yield* sweepTempFiles(deps)
        return secret
      })
    )

    const workers = yield* fileWorkerRegistry(deps, openRoot)

    const locked = <A, E>(taskId: TaskId, body: Effect.Effect<A, E>) =>
      Effect.zipRight(openRoot, lockTimeoutAsStorageError(lock.withLock(taskId, body)))

    /**
     * `body` under the task's lock if no one holds it now; `onBusy()` if someone does. How
     * claims pass over a task another worker is claiming instead of queueing behind it.
     */
    const lockedUnlessBusy = <A, E>(taskId: TaskId, body: Effect.Effect<A, E>, onBusy: () => A) =>
      Effect.zipRight(
        openRoot,
        lock
          .withLock(taskId, body, { waitMillis: 0 })
          .pipe(Effect.catchTag("LockTimeout", () => Effect.succeed(onBusy())))
      )

    /** The record of a task: None when there is none; InvalidRecord when it is damaged. */
    const load = (taskId: TaskId): Effect.Effect<Option.Option<TaskRecord>, InvalidRecord | StorageError> =>
      Effect.flatMap(openRoot, (secret) =>
        Effect.flatMap(readIfExists(fs, layout.record(taskId)), (bytes) =>
          Option.match(bytes, {
            onNone: () => Effect.succeedNone,
            onSome: (data) =>
              Effect.map(decodeRecordFile(layout.record(taskId), data, taskId, secret), Option.some)
          })
        )
      )

    const loadExisting = (taskId: TaskId) =>
      Effect.flatMap(load(taskId), (record) =>
        Option.isSome(record) ? Effect.succeed(record.value) : Effect.fail(new UnknownTask({ taskId }))
      )

    const save = (record: TaskRecord) =>
      Effect.flatMap(host.token, (token) =>
        writeDurable(fs, path, layout.record(record.task_id), tempName(host.pid, token), encodeRecord(record))
      )

    /**
     * Make the markers of one record agree with its state. Called after each write, and by a
     * pass for any marker whose record disagrees. Must run under the task's lock.
     */
    const alignMarkers = (record: TaskRecord) =>
      Effect.gen(function* () {
        if (record.state === "running") yield* touch(fs, layout.runningMarker(record.task_id))
        if (record.state !== "queued") yield* removeIfExists(fs, layout.queuedMarker(record))
        if (record.state === "queued") yield* touch(fs, layout.queuedMarker(record))
        if (record.state !== "running") yield* removeIfExists(fs, layout.runningMarker(record.task_id))
      })

    /** Read, apply a fenced transition, write durably, then move markers; all under the task's lock. */
    const transition = <A, E>(
      taskId: TaskId,
      step: (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>,
      onBusy?: () => A
    ) => {
      const body = Effect.gen(function* () {
        const record = yield* loadExisting(taskId)
        const now = yield* Clock.currentTimeMillis
        const [next, answer] = yield* step(record, now)
        if (next) {
          yield* save(next)
          // The write is durable: the outcome stands. Markers are hints a pass repairs, so a
          // failure to move one is logged rather than reported as a failed operation.
          yield* alignMarkers(next).pipe(
            Effect.catchAll((error) => Effect.logWarning(`index marker not updated: ${error.message}`))
          )
        }
        return answer
      })
      return onBusy === undefined ? locked(taskId, body) : lockedUnlessBusy(taskId, body, onBusy)
    }

    /** Where a record's marker belongs: queued and running records have exactly one. */
    const markerOf = (record: TaskRecord): string | undefined =>
      record.state === "queued"
        ? layout.queuedMarker(record)
        : record.state === "running"
          ? layout.runningMarker(record.task_id)
          : undefined

    /**
     * Make a marker that disagrees with its record agree, under the task's lock, and return
     * the record as it is now. A submit in flight holds the lock from marker to record, so a
     * marker without a record here is a leftover, and a marker seen before its record was
     * written finds the record once the lock is ours. A damaged record keeps its marker, so
     * that every pass keeps reporting it.
     */
    const repairBody = (taskId: TaskId, marker: string) =>
      Effect.gen(function* () {
        const loaded = yield* load(taskId).pipe(
          Effect.map(Option.getOrNull),
          Effect.catchTag("InvalidRecord", () => Effect.succeed("damaged" as const))
        )
        if (loaded === "damaged") return Option.none<TaskRecord>()
        if (loaded === null) {
          yield* removeIfExists(fs, marker)
          return Option.none<TaskRecord>()
        }
        yield* alignMarkers(loaded)
        if (markerOf(loaded) !== marker) yield* removeIfExists(fs, marker)
        return Option.some(loaded)
      })

    const repairMarker = (taskId: TaskId, marker: string) => locked(taskId, repairBody(taskId, marker))

    /**
     * `repairMarker` for a claim, which never waits: "busy" when another writer holds the task
     * now (a submission between its marker and its record, a requeue, another claim), which
     * will leave its markers right.
     */
    const repairMarkerUnlessBusy = (taskId: TaskId, marker: string) =>
      lockedUnlessBusy<Option.Option<TaskRecord> | "busy", InvalidRecord | StorageError>(
        taskId,
        repairBody(taskId, marker),
        () => "busy"
      )

    const invalidNames = Effect.map(Effect.zipRight(openRoot, listDirectory(fs, layout.tasks)), (names) =>
      names
        .filter((name) => name.endsWith(".json") && taskIdOfRecordFile(name) === undefined)
        .map((name): InvalidRecordReport => ({
          file: path.join(layout.tasks, name),
          reason: "file name is not a task id"
        }))
    )

    /**
     * Visit the record a marker points to: the record when it is in the state the marker
     * says, after repairing a marker that disagrees; damaged records are reported once each.
     */
    const visitor = (invalid: Array<InvalidRecordReport>) => {
      const seen = new Set<TaskId>()
      return (taskId: TaskId, marker: string, expected: "queued" | "running") =>
        Effect.gen(function* () {
          if (seen.has(taskId)) return Option.none<TaskRecord>()
          const record = yield* load(taskId).pipe(Effect.either)
          if (Either.isLeft(record)) {
            if (record.left._tag === "StorageError") return yield* record.left
            invalid.push({ file: record.left.file, reason: record.left.reason })
            seen.add(taskId)
            return Option.none<TaskRecord>()
          }
          const agrees = (found: Option.Option<TaskRecord>) =>
            Option.isSome(found) && found.value.state === expected ? Option.some(found.value) : Option.none()
          // A marker that disagrees is repaired; the record it then shows may agree after all.
          const direct = agrees(record.right)
          const current = Option.isSome(direct) ? direct : agrees(yield* repairMarker(taskId, marker))
          if (Option.isSome(current)) seen.add(taskId)
          return current
        })
    }

    const runningIn = (visit: ReturnType<typeof visitor>) =>
      Effect.gen(function* () {
        const running: Array<TaskRecord> = []
        for (const name of [...(yield* listDirectory(fs, layout.running))].sort()) {
          const taskId = taskIdOfRecordFile(`${name}.json`)
          if (taskId === undefined) continue
          const found = yield* visit(taskId, path.join(layout.running, name), "running")
          if (Option.isSome(found)) running.push(found.value)
        }
        return running.sort(submissionOrder)
      })

    const live: TaskStoreShape["live"] = Effect.gen(function* () {
      const queued: Array<TaskRecord> = []
      const invalid: Array<InvalidRecordReport> = [...(yield* invalidNames)]
      const visit = visitor(invalid)
      for (const name of [...(yield* listDirectory(fs, layout.queued))].sort()) {
        const taskId = taskIdOfQueuedMarker(name)
        if (taskId === undefined) continue
        const found = yield* visit(taskId, path.join(layout.queued, name), "queued")
        if (Option.isSome(found)) queued.push(found.value)
      }
      const running = yield* runningIn(visit)
      // A claim between the two listings may show a task in both; the record decides.
      const stillQueued = queued.filter((q) => !running.some((r) => r.task_id === q.task_id))
      return {
        queued: stillQueued.map((record) => record.task_id),
        ...readiness(stillQueued, yield* Clock.currentTimeMillis),
        running,
        invalid
      }
    }).pipe(Effect.withSpan("TaskStore.live"))

    const running: TaskStoreShape["running"] = Effect.gen(function* () {
      yield* openRoot
      const invalid: Array<InvalidRecordReport> = []
      return { running: yield* runningIn(visitor(invalid)), invalid }
    }).pipe(Effect.withSpan("TaskStore.running"))

    const operations = transitionOperations<UnknownTask | InvalidRecord | StorageError>(host, transition)
    const claimNext = yield* queueHead({
      fs,
      path,
      layout,
      load,
      claim: operations.claim,
      repairMarker: repairMarkerUnlessBusy,
      openRoot
    })

    /** Every record file, decoded or reported damaged. O(all tasks): for check and list. */
    const everything = Effect.flatMap(openRoot, (secret) => scanRecords(fs, path, layout, secret))

    /** Changes in a directory of the root; a watch that cannot start (or fails later) just ends. */
    const watchDirectory = (directory: string) =>
      Stream.unwrap(
        Effect.map(Effect.either(openRoot), (opened) =>
          Either.isLeft(opened) ? Stream.empty : fs.watch(directory).pipe(Stream.catchAll(() => Stream.empty))
        )
      )

    const backend: TaskStoreBackend = {
      taskIdFor: (clientRequestId) =>
        Effect.map(openRoot, (secret) => Transitions.taskIdFor(secret, clientRequestId)),
      load,
      insertIfAbsent: (record) =>
        locked(
          record.task_id,
          Effect.gen(function* () {
            const existing = yield* load(record.task_id)
            if (Option.isSome(existing)) return existing
            // Marker first: a crash after it leaves a hint without a record, which a claim drops.
            yield* touch(fs, layout.queuedMarker(record))
            yield* save(record)
            return Option.none()
          })
        ),
      apply: transition,
      scan: everything,
      live,
      claimNext,
      running,
      // A marker appears in index/queued for each submission and requeue. A watch that cannot
      // start (or fails later) ends the stream quietly: the worker's poll still finds the work.
      wakeups: Stream.map(watchDirectory(layout.queued), () => undefined),
      // Every write of a record renames a complete file to tasks/<id>.json.
      changes: Stream.filterMap(watchDirectory(layout.tasks), (event) =>
        Option.fromNullable(taskIdOfRecordFile(path.basename(event.path)))
      ),
      // A page of live tasks reads only live records; any other reads them all.
      list: Effect.fn("TaskStore.list")(function* (request) {
        if (request.state !== undefined && !isTerminal(request.state)) {
          const snapshot = yield* live
          const records =
            request.state === "running"
              ? snapshot.running
              : yield* Effect.map(
                  Effect.forEach(snapshot.queued, (taskId) =>
                    load(taskId).pipe(
                      Effect.map(Option.some),
                      Effect.catchTag("InvalidRecord", () => Effect.succeedNone)
                    )
                  ),
                  (found) =>
                    found.flatMap((o) => (Option.isSome(o) && Option.isSome(o.value) ? [o.value.value] : []))
                )
          return yield* pageOf(records, request)
        }
        const { records } = yield* everything
        return yield* pageOf(records, request)
      }),
      // counts: terminal states are only in the records, so the default (a scan, as check) it is.
      workers
    }
    return makeTaskStore(host, backend, { maxPayloadBytes: options.maxPayloadBytes })
  })
