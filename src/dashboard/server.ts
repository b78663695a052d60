/**
 * The dashboard's HTTP server: guards on every request, then the page's three files (to
 * anyone: they hold no data) or the /api routes (to the Bearer token alone), every answer with
 * the security headers. Serves on whatever TCP HttpServer it is given; `relaykeep dashboard`
 * gives it 127.0.0.1 only.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as HttpServer from "@effect/platform/HttpServer"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Path from "@effect/platform/Path"
import { Cause, Deferred, Effect } from "effect"
import { Version } from "../version.js"
import { errorResponse, NotFound, statusOf, Unauthorized } from "./errors.js"
import { checkHost, checkOrigin, isAuthorized, withSecurityHeaders } from "./guards.js"
import type { StoreInfo } from "./routes.js"
import { apiRoutes } from "./routes.js"

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

/**
 * The whole application, with its guards, for a server listening on `port` (the only port a
 * Host header may name). `stopping` ends open event streams at shutdown.
 */
export const dashboardApp = (options: DashboardOptions, port: number, stopping: Deferred.Deferred<void>) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const api = yield* apiRoutes({ root: options.root, store: options.store, stopping })

    const asset = (pathname: string) => {
      const found = Assets[pathname]
      if (found === undefined) return Effect.fail(new NotFound())
      const [name, contentType] = found
      return fs.readFile(path.join(options.assetsDir, name)).pipe(
        Effect.map((bytes) => HttpServerResponse.uint8Array(bytes, { contentType })),
        Effect.mapError(() => new NotFound())
      )
    }

    const guarded = (request: HttpServerRequest.HttpServerRequest, url: URL) =>
      Effect.gen(function* () {
        const host = yield* checkHost(request, port)
        yield* checkOrigin(request, host)
        // The page's files: the page then reads its token from the URL's fragment, which the
        // browser never sends, and asks the API with it.
        if (!url.pathname.startsWith("/api/")) {
          if (request.method !== "GET" && request.method !== "HEAD") return yield* new NotFound()
          return yield* asset(url.pathname)
        }
        if (!isAuthorized(request, options.token)) {
          // Health answers anyone that it is up, and nothing more.
          if (url.pathname === "/api/health" && request.method === "GET")
            return HttpServerResponse.unsafeJson({ status: "ok", version: Version })
          return yield* new Unauthorized()
        }
        return yield* api.pipe(Effect.catchTag("RouteNotFound", () => new NotFound()))
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
 * open, with the token in its fragment (`#token=`), which a browser keeps to itself. On close,
 * event streams end first so the server can close.
 */
export const serveDashboard = (options: DashboardOptions) =>
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    const address = server.address
    // A fact of the server we were given at boot: every layer that serves the dashboard is TCP.
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("the dashboard serves on TCP only")
    const stopping = yield* Deferred.make<void>()
    const { app } = yield* dashboardApp(options, address.port, stopping)
    yield* server.serve(app)
    yield* Effect.addFinalizer(() => Deferred.succeed(stopping, undefined))
    return `http://127.0.0.1:${address.port}/#token=${options.token}`
  })
