import { Schema } from "effect"

/** The arguments of a call do not match the tool's input schema. Names the field. */
export class InvalidArguments extends Schema.TaggedError<InvalidArguments>()("InvalidArguments", {
  tool: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return this.reason
  }
}

/** A call that needs confirmation was not confirmed. */
export class PermissionDenied extends Schema.TaggedError<PermissionDenied>()("PermissionDenied", {
  tool: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.tool} was not allowed: ${this.reason}`
  }
}

export class ToolTimeout extends Schema.TaggedError<ToolTimeout>()("ToolTimeout", {
  tool: Schema.String,
  millis: Schema.Number
}) {
  override get message() {
    return `${this.tool} did not finish within ${this.millis} ms`
  }
}

export class UnknownTool extends Schema.TaggedError<UnknownTool>()("UnknownTool", {
  tool: Schema.String
}) {
  override get message() {
    return "name: no tool has this name (tools/list names them)"
  }
}
