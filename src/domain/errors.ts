import { Schema } from "effect"
import { AttemptReceipt, quotedModel } from "./provider.js"

/** The same client request id was submitted earlier with a different payload. Nothing changed. */
export class ConflictError extends Schema.TaggedError<ConflictError>()("ConflictError", {
  taskId: Schema.String,
  clientRequestId: Schema.String
}) {
  override get message() {
    // The request id is the caller's input: the message names the field, not its value.
    return `client_request_id: already task ${this.taskId} with a different payload; resubmit the original payload to get its receipt, or use a new id`
  }
}

/** The payload hash given with a task id is not the task's. Reveals nothing else of the record. */
export class HashMismatch extends Schema.TaggedError<HashMismatch>()("HashMismatch", {
  taskId: Schema.String
}) {
  override get message() {
    return `payload_sha256 does not match task ${this.taskId}`
  }
}

export class UnknownTask extends Schema.TaggedError<UnknownTask>()("UnknownTask", {
  taskId: Schema.String
}) {
  override get message() {
    return `no task ${this.taskId}`
  }
}

/** A stored record that does not decode, or does not agree with itself. Never overwritten. */
export class InvalidRecord extends Schema.TaggedError<InvalidRecord>()("InvalidRecord", {
  file: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `damaged record ${this.file}: ${this.reason}`
  }
}

/** The storage failed (write, fsync, rename, read). The operation did not take effect, or is unknown. */
export class StorageError extends Schema.TaggedError<StorageError>()("StorageError", {
  operation: Schema.String,
  path: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.operation} ${this.path} failed: ${this.reason}`
  }
}

/** Input from outside (CLI, MCP, HTTP, library call) that does not validate. Names the field. */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  field: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.field}: ${this.reason}`
  }
}

/** A lock could not be taken within its wait bound. */
export class LockTimeout extends Schema.TaggedError<LockTimeout>()("LockTimeout", {
  key: Schema.String,
  waitedMillis: Schema.Number
}) {
  override get message() {
    return `lock ${this.key} still held by another process after ${this.waitedMillis} ms`
  }
}

/** A write by an attempt that no longer holds the task (fencing). */
export class StaleAttempt extends Schema.TaggedError<StaleAttempt>()("StaleAttempt", {
  taskId: Schema.String,
  attempt: Schema.Number,
  reason: Schema.String
}) {
  override get message() {
    return `attempt ${this.attempt} of task ${this.taskId} no longer holds the task: ${this.reason}`
  }
}

/** The payload names a provider this worker does not have. Not retryable. */
export class UnknownProvider extends Schema.TaggedError<UnknownProvider>()("UnknownProvider", {
  provider: Schema.String,
  available: Schema.Array(Schema.String)
}) {
  override get message() {
    return `provider: the payload names no provider of this worker (available: ${this.available.join(", ") || "none"})`
  }
}

/** Bounded detail a provider failure may carry: the end of stderr, a failure field of stdout. */
const FailureDetail = {
  stderr_tail: Schema.optional(Schema.String),
  stdout_error: Schema.optional(Schema.String),
  receipt: Schema.optional(AttemptReceipt)
}

/** A provider ran and failed. `retryable` says whether another attempt could succeed. */
export class ProviderFailed extends Schema.TaggedError<ProviderFailed>()("ProviderFailed", {
  provider: Schema.String,
  reason: Schema.String,
  retryable: Schema.Boolean,
  ...FailureDetail
}) {
  override get message() {
    return `${this.provider}: ${this.reason}`
  }
}

/** The payload does not fit its provider (keys, model). Nothing was started. Not retryable. */
export class InvalidPayload extends Schema.TaggedError<InvalidPayload>()("InvalidPayload", {
  provider: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `payload for ${this.provider}: ${this.reason}`
  }
}

/** The worker is not set up for this provider (no executable, a relative path, no work dir). */
export class ProviderUnavailable extends Schema.TaggedError<ProviderUnavailable>()("ProviderUnavailable", {
  provider: Schema.String,
  reason: Schema.String
}) {
  override get message() {
    return `${this.provider} is not available: ${this.reason}`
  }
}

/** `relaykeep doctor` found configured providers that could not run a task now. */
export class ProvidersNotReady extends Schema.TaggedError<ProvidersNotReady>()("ProvidersNotReady", {
  providers: Schema.Array(Schema.String)
}) {
  override get message() {
    return `not ready: ${this.providers.join(", ")} (the report above says why)`
  }
}

/** The provider ran past the task timeout; its whole process tree was stopped. */
export class ProviderTimeout extends Schema.TaggedError<ProviderTimeout>()("ProviderTimeout", {
  provider: Schema.String,
  millis: Schema.Number,
  ...FailureDetail
}) {
  override get message() {
    return `${this.provider} did not finish within ${this.millis} ms; its processes were stopped`
  }
}

/** The provider's output passed the limit; it was stopped and the output dropped. */
export class OutputTooLarge extends Schema.TaggedError<OutputTooLarge>()("OutputTooLarge", {
  provider: Schema.String,
  limitBytes: Schema.Number,
  ...FailureDetail
}) {
  override get message() {
    return `${this.provider} wrote more than ${this.limitBytes} bytes; it was stopped`
  }
}

/**
 * A local model server answered as a different model than the one requested. `reported` is the
 * server's text: the providers scrub and cut it before it gets here (http.ts, reportedModel);
 * the message bounds both names again, whoever built the error.
 */
export class ModelMismatch extends Schema.TaggedError<ModelMismatch>()("ModelMismatch", {
  provider: Schema.String,
  requested: Schema.String,
  reported: Schema.String,
  ...FailureDetail
}) {
  override get message() {
    return `${this.provider} reported model ${quotedModel(this.reported)}, not the requested ${quotedModel(this.requested)} (as reported by the server, not verified)`
  }
}

/** No memory record has this id. */
export class UnknownMemory extends Schema.TaggedError<UnknownMemory>()("UnknownMemory", {
  id: Schema.String
}) {
  override get message() {
    return "id: no memory record has this id"
  }
}

/** `tasks/cancel` of a task that already finished: the protocol refuses it, and nothing changed. */
export class TaskFinished extends Schema.TaggedError<TaskFinished>()("TaskFinished", {
  taskId: Schema.String,
  state: Schema.String
}) {
  override get message() {
    return `task ${this.taskId} is already ${this.state}; a finished task cannot be cancelled`
  }
}

/** A task this server process does not run was reported on as if it did (the SDK task-store adapter). */
export class NotHeldHere extends Schema.TaggedError<NotHeldHere>()("NotHeldHere", {
  taskId: Schema.String
}) {
  override get message() {
    return `task ${this.taskId} is not running in this server process`
  }
}
