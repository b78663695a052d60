/**
 * What a CLI's run came to, decided from its output alone: an answer, or a failure with a
 * reason a person can act on and whether another attempt could succeed. Pure, so the output
 * captured from the real CLIs (fixtures/cli/) replays through exactly the code the worker runs.
 */
import type { CliEvent } from "../domain/provider.js"
import { MaxDetailChars, MaxReceiptEvents, truncate } from "../domain/provider.js"

/** The parts of a finished run that the adapters read. */
export interface CliRun {
  readonly exitCode: number
  readonly stdout: string
  /** The end of stderr (bounded). */
  readonly stderr: string
}

interface Accounting {
  readonly usage: unknown
  readonly costUsd: number | null
  readonly modelUsage?: unknown
  readonly events: ReadonlyArray<CliEvent>
}

export type CliVerdict =
  | (Accounting & { readonly _tag: "Answered"; readonly text: string })
  | (Accounting & {
      readonly _tag: "Failed"
      readonly reason: string
      readonly retryable: boolean
      /** What the CLI itself said about the failure (its result text, a turn's error). */
      readonly detail?: string | undefined
    })

/** The receipt's share of events: the first MaxReceiptEvents, each cut, and how many were left. */
export const boundedEvents = (
  events: ReadonlyArray<CliEvent>
): { readonly events?: ReadonlyArray<CliEvent>; readonly events_dropped?: number } =>
  events.length === 0
    ? {}
    : {
        events: events.slice(0, MaxReceiptEvents).map((event) => ({
          type: truncate(event.type, 100),
          message: truncate(event.message, MaxDetailChars)
        })),
        ...(events.length > MaxReceiptEvents ? { events_dropped: events.length - MaxReceiptEvents } : {})
      }

/** Why a run failed, in words a person can act on, and whether another attempt could succeed. */
export interface Classified {
  readonly reason: string
  readonly retryable: boolean
}

/**
 * A transport failure in a CLI's own words, after its own retries: a connection refused, reset
 * or dropped, a request that timed out. Another attempt may well succeed.
 */
export const TransportFailure =
  /Connection (error|failed|refused|reset)|ECONNRESET|ECONNREFUSED|socket hang up|stream disconnected|error sending request|Request timed out|\btimed out\b/i

/** An HTTP status the API (or the CLI's summary of it) named: 408, 429 and 5xx pass, the rest do not. */
export const isTransientStatus = (status: number): boolean =>
  // 501 is a route the server does not have: asking again changes nothing.
  status === 408 || status === 429 || (status >= 500 && status <= 599 && status !== 501)

/** The first line of a text that matches, for quoting a CLI's own words in a reason. */
export const lineMatching = (text: string, pattern: RegExp): string | undefined =>
  text
    .split("\n")
    .map((line) => line.trim())
    .find((line) => pattern.test(line))
