import { Schema } from "effect"

/** The same client request id was submitted earlier with a different payload. Nothing changed. */
export class ConflictError extends Schema.TaggedError<ConflictError>()("ConflictError", {
  taskId: Schema.String,
  clientRequestId: Schema.String
}) {
  override get message() {
    return `client_request_id ${JSON.stringify(this.clientRequestId)} is already task ${this.taskId} with a different payload; resubmit the original payload to get its receipt, or use a new id`
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
    return `no provider ${JSON.stringify(this.provider)} in this worker (available: ${this.available.join(", ") || "none"})`
  }
}

/** A provider ran and failed. `retryable` says whether another attempt could succeed. */
export class ProviderFailed extends Schema.TaggedError<ProviderFailed>()("ProviderFailed", {
  provider: Schema.String,
  reason: Schema.String,
  retryable: Schema.Boolean
}) {
  override get message() {
    return `${this.provider}: ${this.reason}`
  }
}

/** No memory record has this id. */
export class UnknownMemory extends Schema.TaggedError<UnknownMemory>()("UnknownMemory", {
  id: Schema.String
}) {
  override get message() {
    return `no memory record with id ${JSON.stringify(this.id)}`
  }
}
