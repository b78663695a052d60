/** The submit form: checks as `relaykeep submit` does, then shows the API's own answer. */
import { describe, post } from "../api.js"
import { h, mount } from "../dom.js"
import { field, text } from "../json.js"
import { checkPayload, checkRequestId } from "../validate.js"
import { problem } from "./view.js"
import type { View } from "./view.js"

const Example = `{
  "prompt": "Say hello"
}`

export const submitView: View = (root) => {
  const payload = h("textarea", {
    id: "submit-payload",
    name: "payload",
    rows: 10,
    spellcheck: false,
    "aria-describedby": "submit-payload-help"
  })
  payload.value = Example
  const requestId = h("input", {
    id: "submit-request-id",
    name: "request_id",
    autocomplete: "off",
    maxlength: 200,
    "aria-describedby": "submit-request-id-help"
  })
  const message = h("div", { class: "message", "aria-live": "polite" })
  const form = h(
    "form",
    { class: "submit", novalidate: true },
    h("label", { for: "submit-payload" }, "Payload (a JSON object)"),
    payload,
    h(
      "p",
      { id: "submit-payload-help", class: "help" },
      "With no provider the built-in echo hands the payload back. A provider payload is exactly " +
        '{"provider": "claude" | "codex" | "ollama" | "openai", "model": …, "prompt": …}.'
    ),
    h("label", { for: "submit-request-id" }, "Request id (optional)"),
    requestId,
    h(
      "p",
      { id: "submit-request-id-help", class: "help" },
      "Your idempotency key: the same id and payload return the same task. Empty: a fresh one."
    ),
    h("button", { type: "submit" }, "Submit task"),
    message
  )
  mount(root, h("h1", { tabindex: "-1" }, "Submit a task"), form)

  const invalid = (input: HTMLElement, reason: string): void => {
    input.setAttribute("aria-invalid", "true")
    mount(message, problem(reason))
    input.focus()
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault()
    payload.removeAttribute("aria-invalid")
    requestId.removeAttribute("aria-invalid")
    const id = checkRequestId(requestId.value)
    if (!id.ok) return invalid(requestId, id.reason)
    const body = checkPayload(payload.value)
    if (!body.ok) return invalid(payload, body.reason)
    mount(message, h("p", { role: "status" }, "Submitting…"))
    void post(
      "/api/tasks",
      id.value === null ? { payload: body.value } : { payload: body.value, request_id: id.value }
    ).then((outcome) => {
      // The API names the field it refuses; the request id is the only other one.
      if (!outcome.ok)
        return invalid(/request_id/.test(outcome.message) ? requestId : payload, describe(outcome))
      const taskId = text(field(outcome.body, "receipt"), "task_id")
      if (taskId !== null) window.location.hash = `#/task/${taskId}`
      else mount(message, h("p", { role: "status" }, "Submitted."))
    })
  })
  return () => undefined
}
