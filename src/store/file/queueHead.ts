/**
 * `claimNext` for the file store: claims from the index, never from a read of the queue.
 *
 * The names in `index/queued` already order the queue (`<created ms>-<task id>`). A claim walks
 * them oldest first and reads only the records it tries: a record that looks claimable is
 * claimed under its lock (where it is read again, as `claim` always does); a marker whose
 * record disagrees is repaired, as a pass always did. What it learns on the way is kept as
 * hints, so later walks do not read the same records again:
 *
 * - the sorted listing itself, reused while the directory's stamp (inode, mtime, size) is the
 *   one seen after this store's own last change, for at most `MaxListingAgeMillis`. Listing
 *   20,000 names costs 20–60 ms here, more than the claim; reusing it keeps a pass of 1,000
 *   claims from listing 1,000 times. A walk of a reused listing that claims fewer than asked lists
 *   again before it answers, so a stale listing can delay a task but never hide it.
 * - the provider of each task met (a payload never changes), so that the tasks of a provider
 *   with no room are passed over unread;
 * - the end of the backoff of each waiting task met. No one can claim a task before its
 *   backoff ends, so until then its record cannot have changed in a way that makes it
 *   claimable; once the time has passed, the record is read again.
 *
 * Hints of tasks that left the queue are forgotten (`Hints`): when this store claims them, when
 * a walk finds their marker gone, and, for those other workers took, whenever the hints outgrow
 * a fresh listing. A worker that runs for months keeps hints of the queue, not of its history.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import { Clock, Effect, Either, Option, Ref } from "effect"
import type { InvalidRecord, StorageError, UnknownTask } from "../../domain/errors.js"
import type { TaskId } from "../../domain/ids.js"
import { providerOfPayload } from "../../domain/provider.js"
import type { InvalidRecordReport, TaskRecord } from "../../domain/Task.js"
import { timeMillis } from "../../domain/Task.js"
import { isDue } from "../../domain/transitions.js"
import type { ClaimedTask, ClaimNextRequest, ClaimRequest, TaskStoreShape } from "../../services/TaskStore.js"
import { claimRoomOf, fitsRoom, takeRoom } from "../shared.js"
import type { ClaimRoom } from "../shared.js"
import { listDirectory, toStorageError } from "../../platform/durable.js"
import type { Layout } from "./layout.js"
import { taskIdOfQueuedMarker } from "./layout.js"

/** How long a reused listing may be trusted at most, whatever the stamp says. */
export const MaxListingAgeMillis = 1_000

/**
 * A listing of `index/queued`. Claims drop names from it without copying it: names before
 * `start` are gone, and so are those in `dropped`; a walk begins at `start`. Copying the whole
 * listing after every claim would cost O(queue) per claim, which is what this module avoids.
 */
export interface Listing {
  /** Marker names, sorted: the queue, oldest first. Never changed once listed. */
  readonly names: ReadonlyArray<string>
  readonly start: number
  /** Names at or after `start` that are no longer in the queue. */
  readonly dropped: ReadonlySet<string>
  /** The directory's stamp when these names were known to be all of them. */
  readonly stamp: string
  readonly listedAt: number
}

/** Past this many dropped names out of order, a listing is compacted into a new array. */
export const MaxDroppedNames = 4_096

/** `listing` without the names a walk dropped. */
export const withoutNames = (listing: Listing, gone: ReadonlySet<string>, stamp: string): Listing => {
  const dropped = new Set(listing.dropped)
  for (const name of gone) dropped.add(name)
  let start = listing.start
  while (start < listing.names.length && dropped.has(listing.names[start] ?? "")) {
    dropped.delete(listing.names[start] ?? "")
    start += 1
  }
  if (dropped.size <= MaxDroppedNames) return { ...listing, start, dropped, stamp }
  const names = listing.names.slice(start).filter((name) => !dropped.has(name))
  return { names, start: 0, dropped: new Set(), stamp, listedAt: listing.listedAt }
}

/** How many names a listing still holds. */
export const namesLeft = (listing: Listing) => listing.names.length - listing.start - listing.dropped.size

/** What a store learned of the queued tasks it met: each one's provider, and when a backoff ends. */
export interface Hints {
  readonly providers: Map<TaskId, string>
  readonly waitingUntil: Map<TaskId, string>
  /** Forget a task that left the queue. */
  readonly forget: (taskId: TaskId) => void
  /**
   * Given a fresh listing of every queued task, forget the others (claimed or removed by other
   * processes) when the hints hold more tasks than the listing names: O(listing), as the
   * listing itself is, so the hints never hold more than the queue and what one walk met.
   */
  readonly keepListed: (names: ReadonlyArray<string>) => void
}

export const makeHints = (): Hints => {
  const providers = new Map<TaskId, string>()
  const waitingUntil = new Map<TaskId, string>()
  return {
    providers,
    waitingUntil,
    forget: (taskId) => {
      providers.delete(taskId)
      waitingUntil.delete(taskId)
    },
    keepListed: (names) => {
      if (providers.size <= names.length && waitingUntil.size <= names.length) return
      const listed = new Set<string>()
      for (const name of names) {
        const taskId = taskIdOfQueuedMarker(name)
        if (taskId !== undefined) listed.add(taskId)
      }
      for (const map of [providers, waitingUntil])
        for (const taskId of map.keys()) if (!listed.has(taskId)) map.delete(taskId)
    }
  }
}

export interface QueueHeadDeps {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly layout: Layout
  readonly openRoot: Effect.Effect<unknown, StorageError>
  /** The record, unlocked: None when there is none. */
  readonly load: (taskId: TaskId) => Effect.Effect<Option.Option<TaskRecord>, InvalidRecord | StorageError>
  /** The store's fenced claim of one task, under its lock. */
  readonly claim: (
    taskId: TaskId,
    request: ClaimRequest
  ) => Effect.Effect<Option.Option<ClaimedTask>, UnknownTask | InvalidRecord | StorageError>
  /**
   * Make a marker that disagrees with its record agree, under the task's lock, and return the
   * record as it is now; "busy" when another writer holds the task (it will set its markers).
   */
  readonly repairMarker: (
    taskId: TaskId,
    marker: string
  ) => Effect.Effect<Option.Option<TaskRecord> | "busy", InvalidRecord | StorageError>
}

/** What a walk did with one marker. */
type Visit =
  | { readonly _tag: "claimed"; readonly claimed: ClaimedTask }
  /** Left in the queue: waiting, capped, damaged, or taken meanwhile by another worker's claim. */
  | { readonly _tag: "kept" }
  /** Left in the queue: another writer held the task mid-change (a submission, a requeue). */
  | { readonly _tag: "busy" }
  /** The marker no longer names a queued task: drop it from the listing. */
  | { readonly _tag: "gone" }

export const queueHead = (deps: QueueHeadDeps): Effect.Effect<TaskStoreShape["claimNext"]> =>
  Effect.gen(function* () {
    const { fs, layout } = deps
    const listing = yield* Ref.make(Option.none<Listing>())
    const hints = makeHints()
    const { providers, waitingUntil } = hints

    const stamp = Effect.map(
      fs.stat(layout.queued).pipe(Effect.mapError(toStorageError("read", layout.queued))),
      (info) =>
        `${Option.getOrElse(info.ino, () => 0)}:${Option.getOrElse(
          Option.map(info.mtime, (date) => date.getTime()),
          () => 0
        )}:${info.size}`
    )

    const listFresh = Effect.gen(function* () {
      const before = yield* stamp
      const names = [...(yield* listDirectory(fs, layout.queued))].sort()
      hints.keepListed(names)
      const listed: Listing = {
        names,
        start: 0,
        dropped: new Set(),
        stamp: before,
        listedAt: yield* Clock.currentTimeMillis
      }
      return listed
    })

    /** The cached listing when it can still be trusted, else a fresh one; and which it is. */
    const current = Effect.gen(function* () {
      const cached = yield* Ref.get(listing)
      const now = yield* Clock.currentTimeMillis
      if (Option.isSome(cached) && now - cached.value.listedAt < MaxListingAgeMillis) {
        if ((yield* stamp) === cached.value.stamp) return [cached.value, false] as const
      }
      return [yield* listFresh, true] as const
    })

    const visit = (
      taskId: TaskId,
      marker: string,
      room: ClaimRoom,
      request: ClaimNextRequest,
      now: number,
      met: { invalid: Array<InvalidRecordReport>; waiting: Array<string> }
    ): Effect.Effect<Visit, StorageError> =>
      Effect.gen(function* () {
        const known = providers.get(taskId)
        if (known !== undefined && !fitsRoom(room, known)) return { _tag: "kept" } as const
        const until = waitingUntil.get(taskId)
        if (until !== undefined && timeMillis(until) > now) {
          met.waiting.push(until)
          return { _tag: "kept" } as const
        }
        const loaded = yield* deps.load(taskId).pipe(Effect.either)
        if (Either.isLeft(loaded)) {
          if (loaded.left._tag === "StorageError") return yield* loaded.left
          // A damaged record keeps its marker, so that every walk reports it.
          met.invalid.push({ file: loaded.left.file, reason: loaded.left.reason })
          return { _tag: "kept" } as const
        }
        const record = Option.getOrUndefined(loaded.right)
        if (record?.state !== "queued") {
          const repaired = yield* deps
            .repairMarker(taskId, marker)
            .pipe(Effect.catchTag("InvalidRecord", () => Effect.succeed(Option.none<TaskRecord>())))
          // Held: most often a submission between its marker and its record, whose wake-up came
          // with the marker. It stays in the listing, and the batch says to ask again soon.
          if (repaired === "busy") return { _tag: "busy" } as const
          if (Option.isSome(repaired) && repaired.value.state === "queued") return { _tag: "kept" } as const
          hints.forget(taskId)
          return { _tag: "gone" } as const
        }
        const provider = providerOfPayload(record.payload)
        providers.set(taskId, provider)
        if (!isDue(record, now)) {
          if (record.not_before !== undefined) {
            waitingUntil.set(taskId, record.not_before)
            met.waiting.push(record.not_before)
          }
          return { _tag: "kept" } as const
        }
        waitingUntil.delete(taskId)
        if (!fitsRoom(room, provider)) return { _tag: "kept" } as const
        const claimed = yield* deps
          .claim(taskId, {
            workerId: request.workerId,
            leaseMillis: request.leaseMillis,
            retry: request.retry,
            accept: (locked) => fitsRoom(room, providerOfPayload(locked.payload))
          })
          .pipe(
            Effect.catchTags({
              UnknownTask: () => Effect.succeed(Option.none<ClaimedTask>()),
              InvalidRecord: (error) => {
                met.invalid.push({ file: error.file, reason: error.reason })
                return Effect.succeed(Option.none<ClaimedTask>())
              }
            })
          )
        // Queued, due and within room when read, yet not claimed: another writer held it (a
        // submission between its record and its unlock, a requeue, a rival claim). Counted as busy,
        // so that a worker asks again shortly rather than wait for its poll.
        if (Option.isNone(claimed)) return { _tag: "busy" } as const
        hints.forget(taskId)
        return { _tag: "claimed", claimed: claimed.value } as const
      })

    /** One walk of a listing, oldest first, until the room is used up. */
    const walk = (listing: Listing, request: ClaimNextRequest) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const met = { invalid: new Array<InvalidRecordReport>(), waiting: new Array<string>() }
        let busy = 0
        const claimed: Array<ClaimedTask> = []
        const dropped = new Set<string>()
        let room = claimRoomOf(request)
        for (let index = listing.start; index < listing.names.length && room.left > 0; index++) {
          const name = listing.names[index]
          if (name === undefined || listing.dropped.has(name)) continue
          const taskId = taskIdOfQueuedMarker(name)
          if (taskId === undefined) continue
          const outcome = yield* visit(taskId, deps.path.join(layout.queued, name), room, request, now, met)
          if (outcome._tag === "gone") dropped.add(name)
          if (outcome._tag === "busy") busy += 1
          if (outcome._tag === "claimed") {
            claimed.push(outcome.claimed)
            dropped.add(name)
            room = takeRoom(room, providerOfPayload(outcome.claimed.record.payload))
          }
        }
        return { claimed, dropped, met, busy }
      })

    return Effect.fn("TaskStore.claimNext")(function* (request) {
      yield* deps.openRoot
      const [first, fresh] = yield* current
      let used = first
      let result = yield* walk(used, request)
      // A reused listing may miss what another process added since: before answering with
      // fewer tasks than asked for, look at the directory itself.
      if (!fresh && result.claimed.length < request.limit) {
        used = yield* listFresh
        // The tasks already claimed are running now, their markers gone from the fresh listing;
        // the second walk gets what room they left.
        let room = claimRoomOf(request)
        for (const { record } of result.claimed) room = takeRoom(room, providerOfPayload(record.payload))
        const more = yield* walk(used, { ...request, limit: room.left, room: room.providers })
        result = {
          claimed: [...result.claimed, ...more.claimed],
          dropped: more.dropped,
          met: {
            // A damaged record met by both walks is reported once.
            invalid: [
              ...result.met.invalid,
              ...more.met.invalid.filter(
                (report) => !result.met.invalid.some((seen) => seen.file === report.file)
              )
            ],
            waiting: more.met.waiting
          },
          busy: more.busy
        }
      }
      // This store's own claims changed the directory; the stamp after them is the one to
      // trust. A change by another process during the walk is adopted with it, unseen: that is
      // why a listing is trusted for MaxListingAgeMillis at most, and re-read before an answer
      // of fewer tasks than asked for.
      const kept = withoutNames(used, result.dropped, yield* stamp)
      yield* Ref.set(listing, Option.some(kept))
      const waiting = result.met.waiting
      return {
        claimed: result.claimed,
        invalid: result.met.invalid,
        waiting: waiting.length,
        next_due_at: waiting.length === 0 ? null : waiting.reduce((a, b) => (b < a ? b : a)),
        queued: namesLeft(kept),
        busy: result.busy
      }
    })
  })
