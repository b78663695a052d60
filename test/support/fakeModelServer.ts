/**
 * Fake local model servers for the provider tests: node:http on 127.0.0.1, port 0, scripted per
 * request, recording every request (method, path, body, headers). CONNECT requests are recorded
 * too, so a fake can stand in for a proxy (or a redirect target) that must never be reached.
 */
import { Effect, Option, Schema } from "effect"
import type { Scope } from "effect"
import * as http from "node:http"
import type { Duplex } from "node:stream"

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly body: string
  readonly headers: http.IncomingHttpHeaders
}

export type Reply =
  | { readonly _tag: "Json"; readonly status: number; readonly body: unknown }
  | { readonly _tag: "Redirect"; readonly location: string }
  /** The reply, sent only after `millis`. */
  | { readonly _tag: "Slow"; readonly millis: number; readonly reply: Reply }
  /** A 200 whose body is `bytes` long: the start of an Ollama answer that never ends in time. */
  | { readonly _tag: "Huge"; readonly bytes: number }

export type Script = (request: RecordedRequest) => Reply

export interface FakeServer {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  readonly url: string
  /** Every request so far, in arrival order. */
  readonly requests: ReadonlyArray<RecordedRequest>
  /** The exact body of every JSON reply sent so far, in order. */
  readonly replies: ReadonlyArray<string>
}

export const json = (body: unknown, status = 200): Reply => ({ _tag: "Json", status, body })

const RequestedModel = Schema.parseJson(Schema.Struct({ model: Schema.String }))
/** The model a request body asks for, if it names one. */
export const requestedModel = (request: RecordedRequest): Option.Option<string> =>
  Option.map(Schema.decodeUnknownOption(RequestedModel)(request.body), (body) => body.model)

export const ollamaModels = ["llama3.2:1b", "qwen2.5-coder:7b"]
export const openAiModels = ["local-model", "qwen2.5-7b-instruct"]

/**
 * A well-behaved Ollama and OpenAI-compatible server in one: it answers as the requested model
 * (or as `reportAs`, to play a server that loaded another one), and lists its models.
 */
export const modelServer =
  (options: { readonly reportAs?: string } = {}): Script =>
  (request) => {
    const model = options.reportAs ?? Option.getOrElse(requestedModel(request), () => "")
    const route = `${request.method} ${request.path}`
    if (route === "POST /api/generate") {
      return json({
        model,
        created_at: "2025-01-01T00:00:00Z",
        response: "the fake ollama answered ✓",
        done: true,
        prompt_eval_count: 7,
        eval_count: 9
      })
    }
    if (route === "POST /v1/chat/completions") {
      return json({
        id: "chatcmpl-fake",
        object: "chat.completion",
        created: 1735689600,
        model,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: "the fake server answered ✓" },
            finish_reason: "stop"
          }
        ],
        usage: { prompt_tokens: 11, completion_tokens: 5, total_tokens: 16 }
      })
    }
    if (route === "GET /api/tags") return json({ models: ollamaModels.map((name) => ({ name, size: 1 })) })
    if (route === "GET /v1/models")
      return json({ object: "list", data: openAiModels.map((id) => ({ id, object: "model" })) })
    return json({ error: `no route ${route}` }, 404)
  }

/** A server that records whatever reaches it and answers 200 `{}`: a redirect target, a proxy. */
export const recordOnly: Script = () => json({})

interface Sending {
  readonly timers: Set<NodeJS.Timeout>
  readonly replies: Array<string>
}

const send = (res: http.ServerResponse, reply: Reply, sending: Sending): void => {
  switch (reply._tag) {
    case "Json": {
      const body = JSON.stringify(reply.body)
      sending.replies.push(body)
      res.writeHead(reply.status, { "content-type": "application/json" })
      res.end(body)
      return
    }
    case "Redirect":
      res.writeHead(302, { location: reply.location, "content-type": "application/json" })
      res.end(JSON.stringify({ redirect: reply.location }))
      return
    case "Slow": {
      const timer = setTimeout(() => {
        sending.timers.delete(timer)
        if (!res.destroyed) send(res, reply.reply, sending)
      }, reply.millis)
      sending.timers.add(timer)
      return
    }
    case "Huge": {
      res.writeHead(200, { "content-type": "application/json" })
      const chunk = Buffer.alloc(64 * 1024, "x")
      let left = reply.bytes
      res.write('{"model":"m","response":"')
      const pump = () => {
        while (left > 0 && !res.destroyed) {
          const part = left >= chunk.length ? chunk : chunk.subarray(0, left)
          left -= part.length
          if (!res.write(part)) return void res.once("drain", pump)
        }
        if (!res.destroyed) res.end('"}')
      }
      pump()
      return
    }
  }
}

/** A fake server on 127.0.0.1, port 0, closed (connections and timers too) with the scope. */
export const fakeServer = (script: Script): Effect.Effect<FakeServer, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly server: http.Server; readonly timers: Set<NodeJS.Timeout> } & FakeServer>(
      (resume) => {
        const requests: Array<RecordedRequest> = []
        const replies: Array<string> = []
        const timers = new Set<NodeJS.Timeout>()
        const server = http.createServer((req, res) => {
          const chunks: Array<Buffer> = []
          req.on("data", (chunk: Buffer) => chunks.push(chunk))
          req.on("end", () => {
            const recorded: RecordedRequest = {
              method: req.method ?? "",
              path: req.url ?? "",
              body: Buffer.concat(chunks).toString("utf8"),
              headers: req.headers
            }
            requests.push(recorded)
            send(res, script(recorded), { timers, replies })
          })
        })
        server.on("connect", (req: http.IncomingMessage, socket: Duplex) => {
          requests.push({ method: "CONNECT", path: req.url ?? "", body: "", headers: req.headers })
          socket.destroy()
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          const port = typeof address === "object" && address !== null ? address.port : 0
          resume(Effect.succeed({ server, timers, url: `http://127.0.0.1:${port}`, requests, replies }))
        })
      }
    ),
    ({ server, timers }) =>
      Effect.async<void>((resume) => {
        for (const timer of timers) clearTimeout(timer)
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ url, requests, replies }): FakeServer => ({ url, requests, replies })))
