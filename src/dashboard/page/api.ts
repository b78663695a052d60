/**
 * The dashboard's HTTP API, same origin. Every call carries `Authorization: Bearer <token>`,
 * the token this tab holds (session.ts); no cookie is sent (`credentials: "omit"`).
 */
import { field, text } from "./json.js"
import { currentToken } from "./session.js"

/** What the page says when the API refuses its token: the dashboard was restarted since, say. */
export const NoTokenMessage =
  "this tab holds no token this dashboard accepts (each start draws a new one): open the URL `relaykeep dashboard` printed"

/** The headers that prove this tab holds the token; none when it holds none. */
export const authorization = (): Record<string, string> => {
  const token = currentToken()
  return token === null ? {} : { Authorization: `Bearer ${token}` }
}

export type Outcome =
  | { readonly ok: true; readonly status: number; readonly body: unknown }
  | { readonly ok: false; readonly status: number; readonly tag: string; readonly message: string }

const failure = (status: number, body: unknown): Outcome => {
  const error = field(body, "error")
  return {
    ok: false,
    status,
    tag: text(error, "tag") ?? (status === 0 ? "NetworkError" : `HTTP ${status}`),
    message: status === 401 ? NoTokenMessage : (text(error, "message") ?? "the dashboard did not answer")
  }
}

const send = async (
  path: string,
  init: { readonly method: string; readonly headers?: Record<string, string>; readonly body?: string }
): Promise<Outcome> => {
  let response: Response
  try {
    response = await fetch(path, {
      ...init,
      headers: { ...init.headers, ...authorization() },
      credentials: "omit",
      cache: "no-store"
    })
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

export const groupPath = (groupId: string): string => `/api/groups/${encodeURIComponent(groupId)}`
