/**
 * Task changes from the server-sent events at /api/events. One EventSource for the page;
 * views subscribe while they are shown. EventSource reconnects by itself after a drop, and
 * the views re-fetch what they show when it does, so nothing missed in between stays stale.
 */
import { field, isState, text } from "./json.js"
import type { State } from "./json.js"

export interface TaskChange {
  readonly task_id: string
  readonly state: State
  readonly updated_at: string | null
}

type Listener = (change: TaskChange | "reconnected") => void

const listeners = new Set<Listener>()
let source: EventSource | null = null
let dropped = false

const indicator = (connected: boolean): void => {
  const element = document.getElementById("live")
  if (element === null) return
  element.textContent = connected ? "live" : "reconnecting…"
  element.className = connected ? "live on" : "live off"
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

const connect = (): void => {
  if (source !== null) return
  source = new EventSource("/api/events", { withCredentials: true })
  source.addEventListener("open", () => {
    indicator(true)
    if (dropped) for (const listener of listeners) listener("reconnected")
    dropped = false
  })
  source.addEventListener("error", () => {
    dropped = true
    indicator(false)
  })
  source.addEventListener("task", (event) => {
    if (!(event instanceof MessageEvent) || typeof event.data !== "string") return
    const change = parse(event.data)
    if (change !== null) for (const listener of listeners) listener(change)
  })
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
