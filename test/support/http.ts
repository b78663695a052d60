/**
 * Plain HTTP requests over a real connection, through node:http so that tests can send any
 * Host, Origin or Content-Type (fetch would refuse or rewrite some of them).
 */
import { assert } from "@effect/vitest"
import * as http from "node:http"

export interface Reply {
  readonly status: number
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

export interface RequestOptions {
  readonly method?: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string | Uint8Array
}

export const request = (port: number, path: string, options: RequestOptions = {}): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, path, method: options.method ?? "GET", headers: options.headers ?? {} },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8")
          })
        )
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    req.end(options.body)
  })

/** The headers the dashboard puts on every answer (and no-store on /api/*); never a cookie. */
export const assertSecurityHeaders = (reply: Reply, path: string) => {
  assert.strictEqual(
    reply.headers["content-security-policy"],
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    `CSP on ${path}`
  )
  assert.strictEqual(reply.headers["x-content-type-options"], "nosniff", `nosniff on ${path}`)
  assert.strictEqual(reply.headers["x-frame-options"], "DENY", `frame-deny on ${path}`)
  assert.strictEqual(reply.headers["referrer-policy"], "no-referrer", `referrer-policy on ${path}`)
  if (path.startsWith("/api/"))
    assert.strictEqual(reply.headers["cache-control"], "no-store", `no-store on ${path}`)
  assert.isUndefined(reply.headers["set-cookie"], `no Set-Cookie on ${path}`)
}

/** The tag of a JSON error answer. */
export const errorTag = (reply: Reply): string => {
  const parsed: unknown = JSON.parse(reply.body)
  if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
    const error: unknown = parsed.error
    if (typeof error === "object" && error !== null && "tag" in error && typeof error.tag === "string")
      return error.tag
  }
  return assert.fail(`not an error answer: ${reply.body}`)
}

export const errorMessage = (reply: Reply): string => {
  const parsed: unknown = JSON.parse(reply.body)
  if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
    const error: unknown = parsed.error
    if (
      typeof error === "object" &&
      error !== null &&
      "message" in error &&
      typeof error.message === "string"
    )
      return error.message
  }
  return assert.fail(`not an error answer: ${reply.body}`)
}
