/**
 * The notifications of one queue, heard on one LISTEN connection per store: opened by the
 * first subscriber, kept for the life of the store, and opened again with backoff when it
 * breaks (a broken LISTEN connection reports its death; see listen.ts).
 */
import type { Scope } from "effect"
import { Duration, Effect, Option, PubSub, Schedule, Stream } from "effect"
import type { TaskId } from "../../domain/ids.js"
import { listen } from "./listen.js"
import { NotifyChannel, readNotice } from "./rows.js"
import type { PgTarget } from "./target.js"

const relistenSchedule = Schedule.exponential(Duration.millis(200)).pipe(
  Schedule.union(Schedule.spaced(Duration.seconds(10)))
)

export interface Notices {
  /** A task was queued or requeued, or the connection (re)opened: workers look again. */
  readonly wakeups: Stream.Stream<void>
  /** The id of every task written. */
  readonly changes: Stream.Stream<TaskId>
}

export const noticeHub = (
  target: PgTarget,
  connectTimeoutMillis: number,
  scope: Scope.Scope
): Effect.Effect<Notices> =>
  Effect.gen(function* () {
    // None is the connection (re)opening, or a notice naming no task: anything sent while it
    // was down was lost, so every worker looks at the queue again (a waiting read, which
    // follows one task, keeps to its poll).
    const hub = yield* PubSub.sliding<Option.Option<readonly [TaskId, string]>>(1024)
    const start = yield* Effect.once(
      listen(target, NotifyChannel, connectTimeoutMillis).pipe(
        Stream.runForEach((heard) => {
          if (heard._tag === "listening") return PubSub.publish(hub, Option.none())
          const notice = readNotice(target, heard.payload)
          return Option.isSome(notice) ? PubSub.publish(hub, notice.value) : Effect.void
        }),
        Effect.zipRight(Effect.fail("the listening connection ended")),
        Effect.tapError((error) =>
          Effect.logDebug(`LISTEN ${target.display}: ${typeof error === "string" ? error : error.message}`)
        ),
        Effect.retry(relistenSchedule),
        // Whoever subscribes first may do so inside an uninterruptible region; the listener
        // must still stop when the store closes.
        Effect.interruptible,
        Effect.forkIn(scope)
      )
    )
    const heard = Stream.unwrapScoped(
      Effect.zipRight(start, Effect.map(PubSub.subscribe(hub), Stream.fromQueue))
    )
    return {
      wakeups: heard.pipe(
        Stream.filter((notice) => Option.isNone(notice) || notice.value[1] === "queued"),
        Stream.map(() => undefined)
      ),
      changes: Stream.filterMap(
        heard,
        Option.map(([taskId]) => taskId)
      )
    }
  })
