/**
 * Reading the API's JSON without trusting it: small guards that narrow `unknown` to the
 * shapes the page uses, so a field that is missing or of the wrong type shows as absent
 * rather than breaking the page.
 */
export type JsonRecord = { readonly [key: string]: unknown }

export const isRecord = (value: unknown): value is JsonRecord =>
  typeof value === "object" && value !== null && !Array.isArray(value)

export const field = (value: unknown, key: string): unknown => (isRecord(value) ? value[key] : undefined)

export const text = (value: unknown, key: string): string | null => {
  const found = field(value, key)
  return typeof found === "string" ? found : null
}

export const number = (value: unknown, key: string): number | null => {
  const found = field(value, key)
  return typeof found === "number" && Number.isFinite(found) ? found : null
}

export const list = (value: unknown, key: string): ReadonlyArray<unknown> => {
  const found = field(value, key)
  return Array.isArray(found) ? found : []
}

export type State = "queued" | "running" | "complete" | "failed" | "cancelled"
export const States: ReadonlyArray<State> = ["queued", "running", "complete", "failed", "cancelled"]

export const isState = (value: unknown): value is State => States.some((state) => state === value)

/** One row of the task list (the API's summary). */
export interface TaskSummary {
  readonly task_id: string
  readonly client_request_id: string
  readonly state: State
  readonly provider: string | null
  readonly created_at: string
  readonly updated_at: string
  readonly started_at: string | null
  readonly finished_at: string | null
  readonly attempt: number
}

/** A summary from a list entry or from a whole record (which carries the same fields). */
export const toSummary = (
  value: unknown,
  provider: string | null = text(value, "provider")
): TaskSummary | null => {
  const taskId = text(value, "task_id")
  const state = field(value, "state")
  const createdAt = text(value, "created_at")
  if (taskId === null || !isState(state) || createdAt === null) return null
  return {
    task_id: taskId,
    client_request_id: text(value, "client_request_id") ?? "",
    state,
    provider,
    created_at: createdAt,
    updated_at: text(value, "updated_at") ?? createdAt,
    started_at: text(value, "started_at"),
    finished_at: text(value, "finished_at"),
    attempt: number(value, "attempt") ?? 0
  }
}

export const summaries = (value: unknown, key: string): ReadonlyArray<TaskSummary> =>
  list(value, key).flatMap((entry) => {
    const summary = toSummary(entry)
    return summary === null ? [] : [summary]
  })
