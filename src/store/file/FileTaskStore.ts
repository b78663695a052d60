/**
 * The file store: the default, embedded TaskStore (docs/file-store.md).
 *
 * A record is created by a link that fails if it exists, so a submit needs no lock; every
 * later change happens under the task's lock as read → transition → durable write. Index
 * markers follow the marker invariant: a marker is created before a record enters a live state
 * and removed only after it has left one.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import { Clock, Effect, Either, Option, Scope, Stream } from "effect"
import type { InvalidRecord } from "../../domain/errors.js"
import { StorageError, UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { isTaskId } from "../../domain/ids.js"
import type { CollectedTask } from "../../domain/retention.js"
import { collectedOf, stillCollectable, waitsForGroup } from "../../domain/retention.js"
import type { InvalidRecordReport, TaskRecord } from "../../domain/Task.js"
import { submissionOrder } from "../../domain/Task.js"
import * as Transitions from "../../domain/transitions.js"
import { Host } from "../../services/Host.js"
import { Lock, lockTimeoutAsStorageError } from "../../services/Lock.js"
import type { TaskStoreShape } from "../../services/TaskStore.js"
import type { TaskStoreBackend } from "../make.js"
import { makeTaskStore } from "../make.js"
import { countStates, onceSuccessful, pageOf, readiness, transitionOperations } from "../shared.js"
import {
  createIfAbsent,
  ensureDirectory,
  linkIfAbsent,
  listDirectory,
  makeSharedSync,
  readIfExists,
  removeIfExists,
  stageDurable,
  tempName,
  toStorageError,
  touch,
  writeDurable
} from "../../platform/durable.js"
import {
  layoutOf,
  submitterMarker,
  submitterOfMarker,
  taskIdOfQueuedMarker,
  taskIdOfRecordFile,
  timeOfQueuedMarker,
  writerMarkerName
} from "./layout.js"
import type { StoredRecord } from "./records.js"
import { encodeRecord, decodeStoredRecord } from "./records.js"
import { holderOfLockFile } from "./FileLock.js"
import type { SummaryIndexTuning } from "./summaryIndex.js"
import { makeSummaryIndex } from "./summaryIndex.js"
import { entryOf } from "./summaryFormat.js"
import { ensureLayout, loadSecret, reconcileAfterBoot, sweepTempFilesAtOpen } from "./recovery.js"
import { scanRecords } from "./scan.js"
import { checkRoot } from "../../platform/trust.js"
import { fileWorkerRegistry } from "./workers.js"
import { queueHead } from "./queueHead.js"

/**
 * How long a queued marker without a record may belong to a submit at work: a submit links its
 * record within milliseconds of creating its marker. Past this, or once its pid is gone, the
 * marker is a leftover and a pass removes it.
 */
export const SubmitInFlightMillis = 30_000

export interface FileStoreOptions {
  /** The data root; created 0700 if missing. */
  readonly root: string
  readonly maxPayloadBytes?: number
  /** The summary index's sizes (summaryIndex.ts); the defaults suit every root. */
  readonly summaryIndex?: Partial<SummaryIndexTuning> | undefined
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
        yield* lockTimeoutAsStorageError(
          reconcileAfterBoot(deps, secret, summary.rebuildWith(scanRecords(fs, path, layout, secret)))
        )
        yield* sweepTempFilesAtOpen(deps)
        yield* appendForDeadHolders(secret)
        yield* summary.restoreAbandonedClaims.pipe(
          Effect.catchAll((error) => Effect.logWarning(`summary index not checked at open: ${error.message}`))
        )
        return secret
      })
    )

    /** Every record file, decoded or reported damaged. O(all tasks): for check and list. */
    const everything = Effect.flatMap(openRoot, (secret) => scanRecords(fs, path, layout, secret))
    const summary = yield* makeSummaryIndex({ ...deps, scan: everything, tuning: options.summaryIndex })

    /**
     * A process that died holding a task's lock may have written the record and not yet its
     * summary entry (the two are microseconds apart, `save`). So at open, for each task lock a
     * dead process of this host left, the lock is taken (which breaks it, its holder being gone)
     * and the record's entry appended again: harmless if it was there (the same revision), the
     * missing entry if not; and no later open meets that lock again. A lock someone holds now is
     * left to them. A failure here is logged: the index is a hint, and the open goes on.
     */
    const appendForDeadHolders = (secret: Uint8Array) =>
      Effect.gen(function* () {
        for (const name of yield* listDirectory(fs, layout.locks)) {
          if (!isTaskId(name)) continue
          const bytes = yield* readIfExists(fs, path.join(layout.locks, name))
          const holder = Option.flatMap(bytes, holderOfLockFile)
          if (Option.isNone(holder) || holder.value.host !== host.hostname) continue
          const dead = holder.value.boot_id !== host.bootId || !(yield* host.isAlive(holder.value.pid))
          if (!dead) continue
          yield* lock
            .withLock(
              name,
              Effect.gen(function* () {
                const record = yield* readIfExists(fs, layout.record(name))
                if (Option.isNone(record)) return
                const stored = decodeStoredRecord(layout.record(name), record.value, name, secret)
                if (Either.isRight(stored))
                  yield* summary.append(entryOf(stored.right.record, stored.right.revision))
              }),
              { waitMillis: 0 }
            )
            .pipe(Effect.catchTag("LockTimeout", () => Effect.void))
        }
      }).pipe(
        Effect.catchAll((error) => Effect.logWarning(`summary index not repaired at open: ${error.message}`))
      )

    /**
     * This instance's writer marker, created before its first temp file in tasks/ and removed
     * when the store closes: what tells the next open whether tasks/ needs a sweep (recovery.ts).
     */
    const writerMarker = path.join(layout.writers, writerMarkerName(host.bootId, host.pid, yield* host.token))
    const announceWriter = yield* onceSuccessful(
      Effect.zipRight(
        ensureDirectory(fs, layout.writers),
        createIfAbsent(fs, writerMarker, new Uint8Array(0))
      )
    )
    yield* Effect.addFinalizer(() => removeIfExists(fs, writerMarker).pipe(Effect.ignore))

    const workers = yield* fileWorkerRegistry(deps, openRoot)
    // Every write of a record ends with an fsync of tasks/; concurrent writers share it, through
    // one handle on the directory that the store keeps open while it lives.
    const scope = yield* Effect.scope
    const tasksDirectory = yield* onceSuccessful(
      Effect.zipRight(
        openRoot,
        Scope.extend(fs.open(layout.tasks, { flag: "r" }), scope).pipe(
          Effect.mapError(toStorageError("open", layout.tasks))
        )
      )
    )
    const syncTasks = yield* makeSharedSync(
      Effect.flatMap(tasksDirectory, (directory) =>
        directory.sync.pipe(Effect.mapError(toStorageError("fsync", layout.tasks)))
      )
    )

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

    /** The record of a task and its revision: None when there is none; InvalidRecord when it is damaged. */
    const loadStored = (
      taskId: TaskId
    ): Effect.Effect<Option.Option<StoredRecord>, InvalidRecord | StorageError> =>
      Effect.flatMap(openRoot, (secret) =>
        Effect.flatMap(readIfExists(fs, layout.record(taskId)), (bytes) =>
          Option.match(bytes, {
            onNone: () => Effect.succeedNone,
            onSome: (data) =>
              Effect.map(decodeStoredRecord(layout.record(taskId), data, taskId, secret), Option.some)
          })
        )
      )

    /** The record of a task: None when there is none; InvalidRecord when it is damaged. */
    const load = (taskId: TaskId): Effect.Effect<Option.Option<TaskRecord>, InvalidRecord | StorageError> =>
      Effect.map(
        loadStored(taskId),
        Option.map((stored) => stored.record)
      )

    const loadExisting = (taskId: TaskId) =>
      Effect.flatMap(loadStored(taskId), (stored) =>
        Option.isSome(stored) ? Effect.succeed(stored.value) : Effect.fail(new UnknownTask({ taskId }))
      )

    /**
     * Write a record: its data always fsynced before the rename, so that no crash can leave it
     * torn; the directory fsynced too unless `rename` says the rename may be lost to a machine
     * crash (a claim or a heartbeat: see `renameMayBeLost`).
     */
    const save = (record: TaskRecord, revision: number, rename: "durable" | "may be lost") =>
      Effect.flatMap(Effect.zipRight(announceWriter, host.token), (token) =>
        writeDurable(
          fs,
          path,
          layout.record(record.task_id),
          tempName(host.pid, token),
          encodeRecord(record, revision),
          // The summary index's entry right after the rename, before the directory's fsync: so
          // that what the index says is what the record on disk says even when that fsync fails,
          // and no process that dies waiting for the disk leaves a record without its entry.
          Effect.zipRight(
            summary.append(entryOf(record, revision)),
            rename === "durable" ? syncTasks : Effect.void
          )
        )
      )

    /**
     * Whether a change may be lost to a machine crash, its record left as it was before: a claim
     * (queued → running), a heartbeat (the same attempt, running on), or a late outcome kept on a
     * record that runs on under another attempt. After a reboot every lease of the old boot is
     * dead (its boot id), so the task is queued again or reaped either way; nothing acknowledged
     * rests on these writes (a late outcome is kept for the record, never as the result). Every other change (an outcome, a cancel,
     * a requeue, a reap, a release, a submit) is durable before it returns.
     */
    const renameMayBeLost = (before: TaskRecord, after: TaskRecord) =>
      after.state === "running" &&
      (before.state === "queued" || (before.state === "running" && before.attempt === after.attempt))

    /**
     * Move a record's marker as a change of state moves it: the new one first (so a live record is
     * never without one), then the old one. Only the markers the two states name are touched, so
     * that the common path meets no missing file; `alignMarkers` repairs the rest.
     */
    const moveMarkers = (before: TaskRecord, after: TaskRecord) =>
      Effect.gen(function* () {
        const from = markerOf(before)
        const to = markerOf(after)
        if (to !== undefined && to !== from) yield* touch(fs, to)
        if (from !== undefined && from !== to) yield* removeIfExists(fs, from)
      })

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

    /**
     * Read, apply a fenced transition, write durably (the summary index's entry appended right
     * after the rename, `save`), then move markers; all under the task's lock, so that a task's
     * entries are appended in the order of its revisions.
     */
    const transition = <A, E>(
      taskId: TaskId,
      step: (record: TaskRecord, now: number) => Either.Either<readonly [TaskRecord | undefined, A], E>,
      onBusy?: () => A
    ) => {
      const body = Effect.gen(function* () {
        const { record, revision } = yield* loadExisting(taskId)
        const now = yield* Clock.currentTimeMillis
        const [next, answer] = yield* step(record, now)
        if (next) {
          // No interruption between the rename and the entry (`save`): a record written without
          // its entry would be listed as it was until the index is rebuilt.
          yield* Effect.uninterruptible(
            save(next, revision + 1, renameMayBeLost(record, next) ? "may be lost" : "durable")
          )
          // The write is done: the outcome stands. Markers are hints a pass repairs, so a
          // failure to move one is logged rather than reported as a failed operation.
          yield* moveMarkers(record, next).pipe(
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
     * Whether a queued marker without a record belongs to a submit at work: one that created it
     * moments ago, holds its pid in it, and is alive. Its record is about to be linked.
     */
    const submitAtWork = (marker: string) =>
      Effect.gen(function* () {
        if (path.dirname(marker) !== layout.queued) return false
        const age = (yield* Clock.currentTimeMillis) - timeOfQueuedMarker(path.basename(marker))
        if (!(Math.abs(age) < SubmitInFlightMillis)) return false
        const bytes = yield* readIfExists(fs, marker)
        const pid = Option.isSome(bytes) ? submitterOfMarker(bytes.value) : undefined
        return pid !== undefined && (yield* host.isAlive(pid))
      })

    /** `load`, with a damaged record as "damaged". */
    const loadOrDamaged = (taskId: TaskId) =>
      load(taskId).pipe(
        Effect.map(Option.getOrNull),
        Effect.catchTag("InvalidRecord", () => Effect.succeed("damaged" as const))
      )

    /**
     * Make a marker that disagrees with its record agree, under the task's lock, and return
     * the record as it is now; "at work" for the marker of a submit at work (`submitAtWork`),
     * left alone unless `evenAtWork`. A damaged record keeps its marker, so that every pass
     * keeps reporting it.
     *
     * Submits take no lock (docs/file-store.md), so a marker without a record is removed by
     * the one protocol that cannot lose a submit's marker: remove, then read the record again
     * and restore its marker if it is there now. A submit looks for its marker again after it
     * links its record, and creates it if it is gone; so either that look comes after this
     * removal, or the link came before this second read.
     */
    const repairBody = (taskId: TaskId, marker: string, evenAtWork = false) =>
      Effect.gen(function* () {
        const loaded = yield* loadOrDamaged(taskId)
        if (loaded === "damaged") return Option.none<TaskRecord>()
        if (loaded === null) {
          if (!evenAtWork && (yield* submitAtWork(marker))) return "at work" as const
          yield* removeIfExists(fs, marker)
          // Until the second read has spoken, the marker may be a linked record's: put it back if
          // anything fails, and keep it for a record that is damaged, as every marker of one is kept.
          const putBack = touch(fs, marker).pipe(Effect.ignore)
          const again = yield* loadOrDamaged(taskId).pipe(Effect.tapError(() => putBack))
          if (again === "damaged") yield* putBack
          if (again === null || again === "damaged") return Option.none<TaskRecord>()
          yield* alignMarkers(again).pipe(Effect.tapError(() => putBack))
          return Option.some(again)
        }
        yield* alignMarkers(loaded)
        if (markerOf(loaded) !== marker) yield* removeIfExists(fs, marker)
        return Option.some(loaded)
      })

    const repairMarker = (taskId: TaskId, marker: string) => locked(taskId, repairBody(taskId, marker))

    /**
     * `repairMarker` for a claim, which never waits: "busy" when another writer holds the task
     * now (a requeue, another claim) or a submit is at work on it, which will leave its markers
     * right.
     */
    const repairMarkerUnlessBusy = (taskId: TaskId, marker: string) =>
      lockedUnlessBusy<Option.Option<TaskRecord> | "busy", InvalidRecord | StorageError>(
        taskId,
        Effect.map(repairBody(taskId, marker), (found) => (found === "at work" ? "busy" : found)),
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
          const repaired = Option.isSome(direct) ? direct : yield* repairMarker(taskId, marker)
          // A submit at work is not shown until its record is there: it has not been acknowledged.
          const current = repaired === "at work" ? Option.none<TaskRecord>() : agrees(repaired)
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

    /**
     * After a submit's link failed because the record exists: under the task's lock, drop the
     * marker this submit created unless it is the record's own (a submit of the same request in
     * the same millisecond), and make the record's markers right, as a pass would.
     */
    const settleResubmit = (taskId: TaskId, marker: string, markerIsOurs: boolean) =>
      locked(
        taskId,
        Effect.gen(function* () {
          const existing = yield* Effect.either(loadExisting(taskId))
          // Dropped only once the read has shown the marker is not the record's own; a read that
          // failed shows nothing, and the marker stays for a pass to judge.
          const notOwn = Either.isRight(existing)
            ? markerOf(existing.right.record) !== marker
            : existing.left._tag === "InvalidRecord"
          if (markerIsOurs && notOwn) yield* removeIfExists(fs, marker)
          if (Either.isLeft(existing)) {
            // The link said the record is there; a collection may have removed it since (a
            // finished task's): the submit is tried again, and makes a new task.
            if (existing.left._tag === "UnknownTask") return "vanished" as const
            return yield* existing.left
          }
          yield* alignMarkers(existing.right.record)
          return Option.some(existing.right.record)
        })
      )

    /**
     * A submit's own marker, after the submit failed before its record was linked: removed as
     * a pass removes a leftover, so that a record another submit of the same request linked
     * meanwhile keeps its marker. A failure here is logged; the submit's own error stands.
     */
    const dropOwnMarker = (taskId: TaskId, marker: string) =>
      locked(taskId, repairBody(taskId, marker, true)).pipe(
        Effect.catchAll((error) => Effect.logWarning(`index marker not removed: ${error.message}`))
      )

    /**
     * Submit, without a lock (docs/file-store.md, "Submit, exactly"): the queued marker is created,
     * the record staged in a temp file and fsynced, then linked into place, which only succeeds if
     * no record of its task exists; then the temp name is removed, the marker created again if a
     * pass removed it meanwhile, and tasks/ fsynced (shared with concurrent writers).
     * Uninterruptible: an interruption part way would leave a marker a pass must wait out.
     */
    const insertOnce = (record: TaskRecord) =>
      Effect.uninterruptible(
        Effect.gen(function* () {
          yield* openRoot
          const marker = layout.queuedMarker(record)
          const file = layout.record(record.task_id)
          /**
           * The stored record answers a resubmit, once its own link is known durable: the submit
           * that linked it may still be waiting for its directory fsync, so this one waits for one
           * that began after it saw the record (shared with every other writer of the process).
           */
          const answerResubmit = (markerIsOurs: boolean) =>
            Effect.tap(settleResubmit(record.task_id, marker, markerIsOurs), () => syncTasks)
          // A resubmit (a client's retry) costs a look, not a marker and a staged record.
          if (yield* fs.exists(file).pipe(Effect.mapError(toStorageError("read", file))))
            return yield* answerResubmit(false)
          yield* announceWriter
          const temp = path.join(layout.tasks, tempName(host.pid, yield* host.token))
          const mark = createIfAbsent(fs, marker, submitterMarker(host.pid))
          // The marker first, then the record staged: each is a few calls that do not wait for the
          // disk (nodeFiles.ts), so running them side by side would only cost a fiber each.
          const marked = yield* Effect.either(mark)
          const markerIsOurs = Either.getOrElse(marked, () => false)
          /** Undo what this submit did before its record was linked, and fail with `error`. */
          const abandon = (error: StorageError) =>
            Effect.gen(function* () {
              yield* fs.remove(temp).pipe(Effect.ignore)
              if (markerIsOurs) yield* dropOwnMarker(record.task_id, marker)
              return yield* error
            })
          if (Either.isLeft(marked)) return yield* abandon(marked.left)
          yield* stageDurable(fs, temp, encodeRecord(record, 0)).pipe(Effect.catchAll(abandon))
          const linked = yield* linkIfAbsent(fs, temp, file).pipe(Effect.catchAll(abandon))
          if (!linked) {
            yield* fs.remove(temp).pipe(Effect.ignore)
            return yield* answerResubmit(markerIsOurs)
          }
          // Its first entry in the summary index: every later write of the record appends one of a
          // higher revision, whichever lands first.
          yield* summary.append(entryOf(record, 0))
          // The marker is almost always still there: asked first, so that its creation (and the
          // error it would meet) is only paid when a pass did remove it.
          yield* fs.remove(temp).pipe(Effect.ignore)
          const present = yield* fs.exists(marker).pipe(Effect.mapError(toStorageError("read", marker)))
          if (!present) yield* mark
          yield* syncTasks
          return Option.none<TaskRecord>()
        })
      )

    /**
     * `insertOnce`, again when the record it met was removed before it could be read (a
     * collection of a finished task with the same request id): a removal leaves the id free,
     * so the next try links a new record, or meets the one another submit linked meanwhile.
     */
    const insertIfAbsent = (record: TaskRecord) =>
      Effect.gen(function* () {
        for (let attempt = 0; attempt < 3; attempt++) {
          const answer = yield* insertOnce(record)
          if (answer !== "vanished") return answer
        }
        return yield* new StorageError({
          operation: "submit",
          path: layout.record(record.task_id),
          reason: "the record in the way was removed again and again"
        })
      })

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

    /** Changes in a directory of the root; a watch that cannot start (or fails later) just ends. */
    const watchDirectory = (directory: string) =>
      Stream.unwrap(
        Effect.map(Effect.either(openRoot), (opened) =>
          Either.isLeft(opened) ? Stream.empty : fs.watch(directory).pipe(Stream.catchAll(() => Stream.empty))
        )
      )

    /**
     * Remove a chosen record under its task's lock, if it is still the record chosen at the
     * revision the scan read (a late outcome written since keeps it for the next collection).
     * A lock someone holds now is not waited for: that task is being written, and stays. True
     * once removed; a record damaged since the scan is reported and kept.
     */
    const removeIfUnchanged = (chosen: TaskRecord, revision: number, invalid: Array<InvalidRecordReport>) =>
      lock
        .withLock(
          chosen.task_id,
          Effect.gen(function* () {
            const current = yield* Effect.either(loadStored(chosen.task_id))
            if (Either.isLeft(current)) {
              if (current.left._tag === "StorageError") return yield* current.left
              invalid.push({ file: current.left.file, reason: current.left.reason })
              return false
            }
            if (Option.isNone(current.right)) return false
            const { record, revision: now } = current.right.value
            if (now !== revision || !stillCollectable(chosen, record)) return false
            const file = layout.record(chosen.task_id)
            yield* fs.remove(file).pipe(Effect.mapError(toStorageError("remove", file)))
            return true
          }),
          { waitMillis: 0 }
        )
        .pipe(Effect.catchTag("LockTimeout", () => Effect.succeed(false)))

    /**
     * A collection (docs/file-store.md, "Collecting finished tasks"): under the index lock,
     * every record is read, `choose` picks, each chosen record is removed under its own lock,
     * tasks/ is fsynced once (the removals are durable before anything is reported), and the
     * summary index is written without them before the index lock is let go
     * (summaryIndex.ts, `rebuildRemoving`). A dry run reads, and touches nothing.
     */
    const collect: TaskStoreBackend["collect"] = (choose, dryRun) =>
      Effect.gen(function* () {
        if (dryRun) {
          const { records, invalid } = yield* everything
          return { removed: choose(records).map(collectedOf), invalid }
        }
        yield* openRoot
        return yield* lockTimeoutAsStorageError(
          summary.rebuildRemoving((scan) =>
            Effect.gen(function* () {
              const invalid = [...scan.invalid]
              const removed: Array<CollectedTask> = []
              const gone: Array<TaskRecord> = []
              const chosen = choose(scan.records)
              const chosenIds = new Set<string>(chosen.map((record) => record.task_id))
              const goneIds = new Set<string>()
              for (const record of chosen) {
                if (waitsForGroup(record, chosenIds, goneIds)) continue
                if (!(yield* removeIfUnchanged(record, scan.revisions.get(record.task_id) ?? 0, invalid)))
                  continue
                goneIds.add(record.task_id)
                removed.push(collectedOf(record))
                gone.push(record)
              }
              if (gone.length > 0) yield* syncTasks
              return { answer: { removed, invalid }, removed: gone }
            })
          )
        )
      })

    const backend: TaskStoreBackend = {
      taskIdFor: (clientRequestId) =>
        Effect.map(openRoot, (secret) => Transitions.taskIdFor(secret, clientRequestId)),
      load,
      insertIfAbsent,
      apply: transition,
      // `check` reads every record anyway: it rebuilds the summary index from what it read.
      scan: Effect.zipRight(openRoot, summary.rebuild),
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
      // The summary index answers both, from its snapshot and its journals' tail; the records
      // answer when the index cannot be read consistently.
      list: Effect.fn("TaskStore.list")((request) =>
        Effect.zipRight(
          openRoot,
          summary.list(
            request,
            Effect.flatMap(everything, ({ records }) => pageOf(records, request))
          )
        )
      ),
      counts: Effect.zipRight(
        openRoot,
        summary.counts(Effect.map(everything, ({ records }) => countStates(records)))
      ).pipe(Effect.withSpan("TaskStore.counts")),
      collect,
      workers
    }
    return makeTaskStore(host, backend, { maxPayloadBytes: options.maxPayloadBytes })
  })
