/**
 * Task changes from the server-sent events at /api/events, read from a fetched stream so that
 * the request carries the Bearer header (EventSource cannot send one, and no cookie is used).
 * One stream for the page; views subscribe while they are shown. After a drop it reconnects,
 * waiting 1 s and doubling up to 30 s, and the views re-fetch what they show when it is back,
 * so nothing missed in between stays stale.
 */
import { authorization } from "./api.js"
import { field, isState, text } from "./json.js"
import type { State } from "./json.js"
import { splitEvents } from "./sse.js"

export interface TaskChange {
  readonly task_id: string
  readonly state: State
  readonly updated_at: string | null
}

type Listener = (change: TaskChange | "reconnected") => void

const FirstRetryMillis = 1_000
const LastRetryMillis = 30_000

const listeners = new Set<Listener>()
let started = false
let dropped = false
let retryMillis = FirstRetryMillis
/** Ends the wait before the next attempt, while there is one. */
let wake: (() => void) | null = null

const indicator = (live: boolean): void => {
  const element = document.getElementById("live")
  if (element === null) return
  element.textContent = live ? "live" : "reconnecting…"
  element.className = live ? "live on" : "live off"
}

const parse = (data: string): TaskChange | null => {
  let value: unknown
  try {
    value = JSON.parse(data)
  } catch {
    return null
  }
  const taskId = text(value, "task_id")
  const state = field(value, "state")
  if (taskId === null || !isState(state)) return null
  return { task_id: taskId, state, updated_at: text(value, "updated_at") }
}

const opened = (): void => {
  retryMillis = FirstRetryMillis
  indicator(true)
  if (dropped) for (const listener of listeners) listener("reconnected")
  dropped = false
}

/** Read one connection until it ends or fails; resolves either way. */
const readOnce = async (): Promise<void> => {
  try {
    const response = await fetch("/api/events", {
      headers: { Accept: "text/event-stream", ...authorization() },
      credentials: "omit",
      cache: "no-store"
    })
    if (!response.ok || response.body === null) return
    opened()
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
    let buffer = ""
    for (;;) {
      const chunk = await reader.read()
      if (chunk.done) return
      const { events, rest } = splitEvents(buffer + chunk.value)
      buffer = rest
      for (const event of events) {
        if (event.event !== "task") continue
        const change = parse(event.data)
        if (change !== null) for (const listener of listeners) listener(change)
      }
    }
  } catch {
    // A network failure or a server that stopped: reconnect below.
  }
}

const run = async (): Promise<void> => {
  for (;;) {
    await readOnce()
    dropped = true
    indicator(false)
    const waited = retryMillis
    await new Promise<void>((resolve) => {
      const timer = window.setTimeout(() => resolve(), waited)
      wake = () => {
        window.clearTimeout(timer)
        resolve()
      }
    })
    wake = null
    retryMillis = Math.min(retryMillis * 2, LastRetryMillis)
  }
}

const connect = (): void => {
  if (started) return
  started = true
  void run()
}

/** Try again now rather than after the wait (this tab was given a new token). */
export const reconnectNow = (): void => {
  retryMillis = FirstRetryMillis
  wake?.()
}

/** Listen to task changes; returns the function that stops listening. */
export const onTaskChange = (listener: Listener): (() => void) => {
  connect()
  listeners.add(listener)
  return () => listeners.delete(listener)
}

/** Run `action` at most once per `millis`, after the last call (bursts become one fetch). */
export const debounce = (action: () => void, millis: number): (() => void) => {
  let timer: number | undefined
  return () => {
    if (timer !== undefined) window.clearTimeout(timer)
    timer = window.setTimeout(() => {
      timer = undefined
      action()
    }, millis)
  }
}
