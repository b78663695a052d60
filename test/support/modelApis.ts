/**
 * Loopback stand-ins for the two model APIs the agent CLIs call: Anthropic's Messages API
 * (what `claude` reaches through ANTHROPIC_BASE_URL) and OpenAI's Responses API (what `codex`
 * reaches through a `model_provider` whose `base_url` is this server). Both stream server-sent
 * events the way the real services do, and play one scenario per server, so the real CLIs can
 * be driven through success and through each failure without leaving this machine.
 *
 * Used by the real-CLI suite (test/e2e/agentClis.test.ts) and by the script that records the
 * CLIs' output as fixtures (scripts/record-cli-fixtures.ts).
 */
import * as http from "node:http"

export type Scenario =
  /** A streamed answer: the text `answer`. */
  | "success"
  /** The first stream is cut after its first event; later requests succeed. */
  | "drop_once"
  /** Every stream is cut after its first event: the CLI's own retries run out. */
  | "drop_always"
  /** The first request gets a 500; later requests succeed (Codex prints a reconnect notice). */
  | "fail_once"
  /** Every request: overloaded (Anthropic 529 overloaded_error; OpenAI 500 server_error). */
  | "overloaded"
  /** Every request: 429 rate_limit_error. */
  | "rate_limited"
  /** Every request: 401 authentication_error. */
  | "unauthorized"
  /** Every request: 404, the model does not exist. */
  | "unknown_model"
  /** Headers are sent, then nothing: the stream never ends. */
  | "hang"

export interface RecordedCall {
  readonly method: string
  readonly path: string
  readonly body: string
}

export interface ModelApi {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  readonly url: string
  readonly calls: ReadonlyArray<RecordedCall>
  readonly close: () => Promise<void>
}

export const answer = "The stand-in model answered ✓"

type Respond = (call: RecordedCall, index: number, response: http.ServerResponse, model: string) => void

const sendJson = (response: http.ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { "content-type": "application/json" })
  response.end(JSON.stringify(body))
}

const modelOf = (body: string): string => {
  try {
    const parsed: unknown = JSON.parse(body)
    if (
      typeof parsed === "object" &&
      parsed !== null &&
      "model" in parsed &&
      typeof parsed.model === "string"
    )
      return parsed.model
  } catch {
    // Not JSON: answered below like any other request.
  }
  return "unknown"
}

const serve = (respond: Respond): Promise<ModelApi> =>
  new Promise((resolve, reject) => {
    const calls: Array<RecordedCall> = []
    const open = new Set<http.ServerResponse>()
    const server = http.createServer((request, response) => {
      const chunks: Array<Buffer> = []
      request.on("data", (chunk: Buffer) => chunks.push(chunk))
      request.on("end", () => {
        const call = {
          method: request.method ?? "",
          path: request.url ?? "",
          body: Buffer.concat(chunks).toString()
        }
        calls.push(call)
        open.add(response)
        response.on("close", () => open.delete(response))
        respond(call, calls.length - 1, response, modelOf(call.body))
      })
    })
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      if (address === null || typeof address === "string") return reject(new Error("no TCP address"))
      resolve({
        url: `http://127.0.0.1:${address.port}`,
        calls,
        close: () =>
          new Promise((done) => {
            for (const response of open) response.destroy()
            server.close(() => done())
          })
      })
    })
  })

const sse = (response: http.ServerResponse) => {
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
  return (type: string, data: object) =>
    response.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`)
}

/** Anthropic's Messages API: `POST /v1/messages`, streamed; errors as Anthropic sends them. */
export const anthropicApi = (scenario: Scenario): Promise<ModelApi> =>
  serve((call, index, response, model) => {
    const error = (status: number, type: string, message: string) =>
      sendJson(response, status, { type: "error", error: { type, message } })
    if (call.method !== "POST" || !call.path.startsWith("/v1/messages")) {
      return error(404, "not_found_error", `no route ${call.method} ${call.path}`)
    }
    if (scenario === "overloaded") return error(529, "overloaded_error", "Overloaded")
    if (scenario === "rate_limited") return error(429, "rate_limit_error", "Rate limited")
    if (scenario === "unauthorized") return error(401, "authentication_error", "invalid x-api-key")
    if (scenario === "unknown_model") return error(404, "not_found_error", `model: ${model}`)
    if (scenario === "fail_once" && index === 0) return error(500, "api_error", "Internal server error")
    const event = sse(response)
    if (scenario === "hang") return
    const usage = { input_tokens: 12, output_tokens: 1 }
    event("message_start", {
      message: {
        id: `msg_${index}`,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        usage
      }
    })
    if ((scenario === "drop_once" && index === 0) || scenario === "drop_always") return response.destroy()
    event("content_block_start", { index: 0, content_block: { type: "text", text: "" } })
    event("content_block_delta", { index: 0, delta: { type: "text_delta", text: answer } })
    event("content_block_stop", { index: 0 })
    event("message_delta", {
      delta: { stop_reason: "end_turn", stop_sequence: null },
      usage: { output_tokens: 9 }
    })
    event("message_stop", {})
    response.end()
  })

/** OpenAI's Responses API: `POST …/responses`, streamed; `GET …/models` lists the one model. */
export const responsesApi = (
  scenario: Scenario,
  models: ReadonlyArray<string> = ["stand-in-model"]
): Promise<ModelApi> =>
  serve((call, index, response, model) => {
    const error = (status: number, type: string, code: string, message: string) =>
      sendJson(response, status, { error: { type, code, message } })
    if (call.method === "GET" && call.path.endsWith("/models")) {
      return sendJson(response, 200, { object: "list", data: models.map((id) => ({ id, object: "model" })) })
    }
    if (call.method !== "POST" || !call.path.endsWith("/responses")) {
      return error(404, "invalid_request_error", "not_found", `no route ${call.method} ${call.path}`)
    }
    if (scenario === "overloaded")
      return error(500, "server_error", "server_error", "The server is overloaded")
    if (scenario === "rate_limited")
      return error(429, "rate_limit_exceeded", "rate_limit_exceeded", "Rate limited")
    if (scenario === "unauthorized")
      return error(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided")
    if (scenario === "unknown_model")
      return error(404, "invalid_request_error", "model_not_found", `The model ${model} does not exist`)
    if (scenario === "fail_once" && index === 0)
      return error(500, "server_error", "server_error", "The server had an error")
    const event = sse(response)
    if (scenario === "hang") return
    event("response.created", { response: { id: `resp_${index}`, model } })
    if ((scenario === "drop_once" && index === 0) || scenario === "drop_always") return response.destroy()
    const item = {
      type: "message",
      role: "assistant",
      id: `msg_${index}`,
      content: [{ type: "output_text", text: answer }]
    }
    event("response.output_item.added", { output_index: 0, item: { ...item, content: [] } })
    event("response.output_text.delta", {
      output_index: 0,
      content_index: 0,
      item_id: item.id,
      delta: answer
    })
    event("response.output_item.done", { output_index: 0, item })
    event("response.completed", {
      response: {
        id: `resp_${index}`,
        model,
        usage: {
          input_tokens: 12,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 9,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: 21
        }
      }
    })
    response.end()
  })
