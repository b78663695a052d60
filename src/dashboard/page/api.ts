/**
 * The dashboard's HTTP API, same origin. The token travels only in the HttpOnly cookie the
 * server set at `/?token=`, so the page never sees it; fetches send it with `credentials`.
 */
import { field, text } from "./json.js"

export type Outcome =
  | { readonly ok: true; readonly status: number; readonly body: unknown }
  | { readonly ok: false; readonly status: number; readonly tag: string; readonly message: string }

const failure = (status: number, body: unknown): Outcome => {
  const error = field(body, "error")
  return {
    ok: false,
    status,
    tag: text(error, "tag") ?? (status === 0 ? "NetworkError" : `HTTP ${status}`),
    message:
      text(error, "message") ??
      (status === 401
        ? "this browser has no dashboard token: open the URL `relaykeep dashboard` printed"
        : "the dashboard did not answer")
  }
}

const send = async (path: string, init: RequestInit): Promise<Outcome> => {
  let response: Response
  try {
    response = await fetch(path, { ...init, credentials: "same-origin", cache: "no-store" })
  } catch {
    return failure(0, null)
  }
  let body: unknown = null
  try {
    body = await response.json()
  } catch {
    body = null
  }
  return response.ok ? { ok: true, status: response.status, body } : failure(response.status, body)
}

/** A GET with query parameters; empty ones are left out. */
export const get = (path: string, query: Readonly<Record<string, string>> = {}): Promise<Outcome> => {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(query)) if (value !== "") params.set(name, value)
  const search = params.toString()
  return send(search === "" ? path : `${path}?${search}`, { method: "GET" })
}

/** A POST with a JSON body (the server refuses any other content type). */
export const post = (path: string, body: unknown = {}): Promise<Outcome> =>
  send(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body)
  })

export const describe = (outcome: Outcome): string => (outcome.ok ? "" : `${outcome.tag}: ${outcome.message}`)

export const taskPath = (taskId: string): string => `/api/tasks/${encodeURIComponent(taskId)}`
