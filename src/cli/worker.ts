import { Command, Options } from "@effect/cli"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { InvalidInput } from "../domain/errors.js"
import { parseDurationWithUnit } from "../domain/duration.js"
import { MaxWorkerIdLength } from "../domain/worker.js"
import type { RetryPolicy } from "../domain/Task.js"
import { DefaultRetryPolicy } from "../domain/Task.js"
import { Host } from "../services/Host.js"
import { DefaultCancelPollMillis } from "../worker/attempt.js"
import { jsonLogs, workerOutputStderrLayer } from "../worker/events.js"
import { DefaultLeaseMillis, runPass } from "../worker/pass.js"
import {
  DefaultConcurrency,
  DefaultGraceMillis,
  DefaultHeartbeatMillis,
  DefaultPollMillis,
  runWatch
} from "../worker/watch.js"
import {
  duration,
  DurationMillis,
  ParsedText,
  resolveRoot,
  storeLayer,
  storeOptions,
  integerBetween
} from "./options.js"
import { printJson } from "./output.js"
import type { ProviderArgs } from "./providerOptions.js"
import { httpClientLayer, providerOptions } from "./providerOptions.js"
import { resolveProviderSettings, resolveRetention } from "../providers/config.js"
import { providersLayer } from "../providers/layer.js"

const workerId = Options.text("worker-id").pipe(
  Options.withSchema(
    Schema.String.pipe(
      Schema.filter((text) => text.length >= 1 && text.length <= MaxWorkerIdLength, {
        message: (issue) =>
          `--worker-id: must be 1 to ${MaxWorkerIdLength} characters, not ${String(issue.actual).length}`
      })
    )
  ),
  Options.withDescription("Names this worker in leases and in the worker registry (default: host:pid)"),
  Options.optional
)
const lease = duration("lease", `${DefaultLeaseMillis / 1000}s`).pipe(
  Options.withDescription("Lease length; heartbeats extend it while a task runs (e.g. 60s, 5m)")
)

/** A whole number within bounds, or a usage error naming the flag. */
const count = (name: string, fallback: number, min: number, max: number) =>
  integerBetween(name, min, max).pipe(Options.withDefault(fallback))

const watch = Options.boolean("watch").pipe(
  Options.withDescription(
    "Keep running: wake on new submissions, run tasks concurrently, stop on SIGINT/SIGTERM"
  )
)
const limit = integerBetween("limit", 1, 1_000_000).pipe(
  Options.withDescription(
    "Without --watch: run at most N tasks, then exit (for cron, or to run the next few)"
  ),
  Options.optional
)
const concurrency = count("concurrency", DefaultConcurrency, 1, 64).pipe(
  Options.withDescription(`With --watch: attempts running at once (default ${DefaultConcurrency})`)
)
/** `claude=1,codex=2` as a map, or the reason it is not one, naming the bad entry. */
export const parseProviderCaps = (text: string): Either.Either<ReadonlyMap<string, number>, string> =>
  Either.map(
    Either.all(
      text
        .split(",")
        .map((part) => part.trim())
        .filter((part) => part !== "")
        .map((part, index) => {
          const match = /^([A-Za-z0-9._-]+)=(\d{1,3})$/.exec(part)
          const cap = Number(match?.[2])
          return match?.[1] !== undefined && cap >= 1
            ? Either.right([match[1], cap] as const)
            : Either.left(`entry ${index + 1} is not PROVIDER=N with N from 1 to 999`)
        })
    ),
    (entries) => new Map(entries)
  )

// Checked even without --watch (where the caps do not apply): a bad flag is never ignored.
const maxPerProvider = Options.text("max-per-provider").pipe(
  Options.withSchema(
    ParsedText(
      "--max-per-provider",
      Schema.ReadonlyMapFromSelf({ key: Schema.String, value: Schema.Number }),
      parseProviderCaps,
      (caps) => [...caps].map(([provider, cap]) => `${provider}=${cap}`).join(",")
    )
  ),
  Options.withDescription("With --watch: caps per provider, e.g. claude=1,codex=1"),
  Options.optional
)
const maxAttempts = count("max-attempts", DefaultRetryPolicy.max_attempts, 1, 100).pipe(
  Options.withDescription(
    "Attempts a task may take when its failure is retryable (default 1: a task is never re-run unless you ask)"
  )
)
const retryBackoff = duration("retry-backoff", `${DefaultRetryPolicy.backoff_initial_ms / 1000}s`).pipe(
  Options.withDescription("Wait before the second attempt; doubles each time, with jitter (default 10s)")
)
const retryBackoffMax = duration("retry-backoff-max", `${DefaultRetryPolicy.backoff_max_ms / 1000}s`).pipe(
  Options.withDescription("The longest wait between attempts (default 10m)")
)
const grace = duration("grace", `${DefaultGraceMillis / 1000}s`).pipe(
  Options.withDescription(
    "With --watch: how long running tasks may finish after SIGINT/SIGTERM (default 30s)"
  )
)
const poll = duration("poll", `${DefaultPollMillis / 1000}s`).pipe(
  Options.withDescription("With --watch: look at the queue at least this often (default 5s)")
)
const retention = Options.text("retention").pipe(
  Options.withSchema(DurationMillis("--retention", parseDurationWithUnit)),
  Options.withDescription(
    "With --watch: remove tasks that finished longer ago than this (e.g. 30d), at the start and then hourly, more often when it is short (default: retention in the root's config.json, else keep every task)"
  ),
  Options.optional
)
const logFormat = Options.choice("log-format", ["auto", "text", "json"]).pipe(
  Options.withDefault("auto"),
  Options.withDescription(
    "With --watch: events on stderr as text (a live status line on a terminal) or one JSON object each (default auto: text)"
  )
)

/** The providers as this worker's settings configure them, checked before any task is claimed. */
export const providerLayer = (args: ProviderArgs & { readonly root: Option.Option<string> }) =>
  Layer.unwrapEffect(
    Effect.gen(function* () {
      const settings = yield* resolveProviderSettings(args, yield* resolveRoot(args.root))
      return providersLayer(settings)
    })
  )

export const worker = Command.make(
  "worker",
  {
    ...storeOptions,
    workerId,
    lease,
    watch,
    limit,
    concurrency,
    maxPerProvider,
    maxAttempts,
    retryBackoff,
    retryBackoffMax,
    grace,
    poll,
    retention,
    logFormat,
    ...providerOptions
  },
  (args) =>
    Effect.gen(function* () {
      const host = yield* Host
      const id = Option.getOrElse(args.workerId, () => `${host.hostname}:${host.pid}`)
      if (args.retryBackoffMax < args.retryBackoff)
        return yield* new InvalidInput({
          field: "--retry-backoff-max",
          reason: "must not be shorter than --retry-backoff"
        })
      const retry: RetryPolicy = {
        max_attempts: args.maxAttempts,
        backoff_initial_ms: args.retryBackoff,
        backoff_max_ms: args.retryBackoffMax
      }
      const caps = Option.getOrElse(args.maxPerProvider, () => new Map<string, number>())
      if (args.watch && Option.isSome(args.limit))
        return yield* new InvalidInput({
          field: "--limit",
          reason: "bounds one pass; a watching worker (--watch) runs until it is stopped"
        })
      if (!args.watch && Option.isSome(args.retention))
        return yield* new InvalidInput({
          field: "--retention",
          reason: "collects on a timer: it applies to a watching worker (--watch)"
        })
      if (!args.watch)
        return yield* printJson(
          yield* runPass({
            workerId: id,
            leaseMillis: args.lease,
            retry,
            limit: Option.getOrUndefined(args.limit)
          })
        )
      const summary = yield* runWatch({
        workerId: id,
        leaseMillis: args.lease,
        retry,
        concurrency: args.concurrency,
        maxPerProvider: caps,
        pollMillis: args.poll,
        graceMillis: args.grace,
        cancelPollMillis: DefaultCancelPollMillis,
        heartbeatMillis: DefaultHeartbeatMillis,
        retentionMillis: yield* resolveRetention(args.retention, yield* resolveRoot(args.root))
      }).pipe(
        Effect.provide(workerOutputStderrLayer(args.logFormat)),
        args.logFormat === "json" ? jsonLogs : (effect) => effect
      )
      yield* printJson(summary)
    })
).pipe(
  Command.withDescription(
    "Run one pass over the queue (reap orphans, then claim and run ready tasks one by one, oldest first, until none is left or --limit is reached), or keep running with --watch."
  ),
  Command.provide((args) => Layer.merge(storeLayer(args), providerLayer(args))),
  Command.provide(httpClientLayer)
)
