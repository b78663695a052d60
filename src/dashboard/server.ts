/**
 * The dashboard's HTTP server: guards on every request, then the page's three files or the
 * /api routes, every answer with the security headers. Serves on whatever HttpServer it is
 * given; `relaykeep dashboard` gives it 127.0.0.1 only.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Path from "@effect/platform/Path"
import { Cause, Deferred, Effect } from "effect"
import { Version } from "../version.js"
import { errorResponse, NotFound, statusOf, Unauthorized } from "./errors.js"
import { authenticationOf, checkHost, checkOrigin, tokenCookie, withSecurityHeaders } from "./guards.js"
import type { StoreInfo } from "./routes.js"
import { apiRoutes } from "./routes.js"
import { isToken } from "./token.js"

export interface DashboardOptions {
  readonly token: string
  /** The data root (token, audit log, providers' config.json). */
  readonly root: string
  readonly store: StoreInfo
  /** Where index.html, app.js and app.css are: `dist/page/` of the package. */
  readonly assetsDir: string
}

/** The page's files, by the path they are served at; nothing else is served from the directory. */
const Assets: Readonly<Record<string, readonly [string, string]>> = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/index.html": ["index.html", "text/html; charset=utf-8"],
  "/app.js": ["app.js", "text/javascript; charset=utf-8"],
  "/app.css": ["app.css", "text/css; charset=utf-8"]
}

const UnauthorizedText =
  "RelayKeep dashboard: open the URL that `relaykeep dashboard` printed (it carries the token).\n"

/** The whole application, with its guards. `stopping` ends open event streams at shutdown. */
export const dashboardApp = (options: DashboardOptions, stopping: Deferred.Deferred<void>) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const api = yield* apiRoutes({ root: options.root, store: options.store, stopping })

    const asset = (pathname: string) => {
      const found = Assets[pathname]
      if (found === undefined) return Effect.fail(new NotFound({ path: pathname }))
      const [name, contentType] = found
      return fs.readFile(path.join(options.assetsDir, name)).pipe(
        Effect.map((bytes) => HttpServerResponse.uint8Array(bytes, { contentType })),
        Effect.mapError(() => new NotFound({ path: pathname }))
      )
    }

    const guarded = (request: HttpServerRequest.HttpServerRequest, url: URL) =>
      Effect.gen(function* () {
        const host = yield* checkHost(request)
        const auth = authenticationOf(request, options.token)
        yield* checkOrigin(request, host, auth)
        const isApi = url.pathname.startsWith("/api/")
        // Health answers anyone that it is up, and nothing more.
        if (auth === "none" && url.pathname === "/api/health" && request.method === "GET")
          return HttpServerResponse.unsafeJson({ status: "ok", version: Version })
        // The printed URL: trade the token in the query for the cookie, and drop it from the address.
        if (url.pathname === "/" && request.method === "GET" && url.searchParams.has("token")) {
          if (!isToken(options.token, url.searchParams.get("token") ?? ""))
            return HttpServerResponse.text(UnauthorizedText, { status: 401 })
          return HttpServerResponse.empty({
            status: 303,
            headers: { location: "/", "set-cookie": tokenCookie(options.token) }
          })
        }
        if (auth === "none")
          return isApi
            ? yield* new Unauthorized()
            : HttpServerResponse.text(UnauthorizedText, { status: 401 })
        if (isApi)
          return yield* api.pipe(Effect.catchTag("RouteNotFound", () => new NotFound({ path: url.pathname })))
        if (request.method !== "GET" && request.method !== "HEAD")
          return yield* new NotFound({ path: url.pathname })
        return yield* asset(url.pathname)
      })

    const app = Effect.gen(function* () {
      const request = yield* HttpServerRequest.HttpServerRequest
      const url = new URL(request.url, "http://127.0.0.1")
      return yield* guarded(request, url).pipe(
        Effect.catchAll((error) =>
          statusOf(error._tag) >= 500
            ? Effect.as(
                Effect.logError(`${request.method} ${url.pathname}: ${error._tag}: ${error.message}`),
                errorResponse(error)
              )
            : Effect.succeed(errorResponse(error))
        ),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.as(
                Effect.logError(`${request.method} ${url.pathname} failed`, cause),
                errorResponse({ _tag: "InternalError", message: "the dashboard failed; see its log" })
              )
        ),
        Effect.map(withSecurityHeaders(url.pathname))
      )
    })
    return { app }
  })

/**
 * Serve the dashboard on the HttpServer in context until the scope closes; returns the URL to
 * open (with the token). On close, event streams end first so the server can close.
 */
export const serveDashboard = (options: DashboardOptions) =>
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    const stopping = yield* Deferred.make<void>()
    const { app } = yield* dashboardApp(options, stopping)
    yield* server.serve(app)
    yield* Effect.addFinalizer(() => Deferred.succeed(stopping, undefined))
    const address = server.address
    const port = address._tag === "TcpAddress" ? address.port : 0
    return `http://127.0.0.1:${port}/?token=${options.token}`
  })
