/**
 * RelayKeep as a library: the domain types, the ports and their layers, the worker pass.
 * Compose your own program from these; `src/bin/` shows how the CLI does it.
 */
export * from "./domain/errors.js"
export * from "./domain/ids.js"
export * from "./domain/Task.js"
export * as Transitions from "./domain/transitions.js"
export { canonicalJson } from "./domain/canonical.js"
export { parseDuration } from "./domain/duration.js"
export { DefaultMaxPayloadBytes } from "./domain/submission.js"

export { Host } from "./services/Host.js"
export { Lock } from "./services/Lock.js"
export type { LockOptions } from "./services/Lock.js"
export { fileLockLayer } from "./store/file/FileLock.js"
export type { FileLockSettings } from "./store/file/FileLock.js"
export { Provider } from "./services/Provider.js"
export type { ProviderError, ProviderResult, ProviderTask } from "./services/Provider.js"
export type { ProviderDefinition } from "./providers/registry.js"
export { echoProvider } from "./providers/echo.js"
export { echoProviderLayer, providerRegistryLayer, providersLayer } from "./providers/layer.js"
export { TaskStore } from "./services/TaskStore.js"
export type {
  CheckReport,
  ClaimedTask,
  ClaimRequest,
  ListRequest,
  LiveSnapshot,
  SubmitRequest,
  TaskPage,
  TaskStoreShape
} from "./services/TaskStore.js"
// The TaskStore's layers, one per store.
export { fileTaskStoreLayer } from "./store/file/layer.js"
export { nodeContextLayer, layer as nodeFileSystemLayer } from "./platform/nodeFiles.js"
export type { FileStoreOptions } from "./store/file/FileTaskStore.js"
export { memoryTaskStoreLayer } from "./store/memory/layer.js"
export type { MemoryStoreOptions } from "./store/memory/MemoryTaskStore.js"
export { pgTaskStoreLayer } from "./store/postgres/layer.js"
export type { PgStoreOptions } from "./store/postgres/target.js"

// Broadcast: one prompt to several providers, one task each under one group.
export { submitBroadcast } from "./broadcast/submit.js"
export type { BroadcastError, BroadcastRequest } from "./broadcast/submit.js"
export { readGroup, readGroupTrusted } from "./broadcast/read.js"
export type { ReadGroupError, ReadGroupOptions } from "./broadcast/read.js"
export {
  GroupReceipt,
  GroupState,
  GroupUnsettled,
  GroupView,
  MemberReceipt,
  MemberView,
  NotAGroup,
  parseTargets,
  Target,
  Targets
} from "./domain/broadcast.js"

export { runPass, PassReport, DefaultLeaseMillis } from "./worker/pass.js"
export { AttemptOutcome, WorkerEvent, WorkerEventLine } from "./domain/workerEvent.js"
export { reapOrphans, ReapReport, ReapedTask } from "./worker/reap.js"
export { runAttempt, isRetryable, taskErrorOf } from "./worker/attempt.js"
export type { AttemptEnd, AttemptReport } from "./worker/attempt.js"
export { Shutdown } from "./services/Shutdown.js"
export type { PassOptions } from "./worker/pass.js"
export { Version } from "./version.js"

// The MCP tool pipeline, for building audited servers of your own.
export { defineTool } from "./mcp/Tool.js"
export type { TaskSupport, Tier, Tool, ToolContext, ToolFailure, ToolSpec } from "./mcp/Tool.js"
export { McpTasks } from "./services/McpTasks.js"
export type { InServerTask, TaskCreateError, TaskLookupError, WorkFailure } from "./services/McpTasks.js"
export { mcpTasksLayer } from "./mcp/taskEngine.js"
export { makeDurableTaskStore } from "./mcp/sdkTaskStore.js"
export {
  BroadcastProvider,
  formatHandle,
  InProcessProvider,
  McpTask,
  McpToolResult,
  parseHandle
} from "./domain/mcpTask.js"
export type { TaskHandle } from "./domain/mcpTask.js"
export { callTool, inProcessContext, toolMap } from "./mcp/pipeline.js"
export type { CallContext, ToolResult } from "./mcp/pipeline.js"
export { ConfirmPolicy } from "./services/ConfirmPolicy.js"
export type { ConfirmRequest, Decision } from "./services/ConfirmPolicy.js"
export { allowlistPolicyLayer, denyAllPolicyLayer, elicitationPolicyLayer } from "./mcp/confirmPolicies.js"
export { AuditLog } from "./services/AuditLog.js"
export { auditLogLayer, auditLogMemoryLayer } from "./mcp/auditLayer.js"
export type { AuditFilter, PruneReport, PruneRule } from "./domain/audit.js"
export { AuditEntry, AuditStatus } from "./domain/audit.js"
export { InvalidArguments, PermissionDenied, ToolTimeout, UnknownTool } from "./mcp/errors.js"
export { redact, isSensitiveKey } from "./domain/redact.js"
export { describeTool, makeMcpServer } from "./mcp/server.js"
export type { ServerSpec } from "./mcp/server.js"
export { serveStdio } from "./mcp/stdio.js"
export { MemoryStore } from "./services/MemoryStore.js"
export { memoryStoreLayer } from "./store/memoryLayer.js"
export { MemoryRecord, searchMemory } from "./domain/memory.js"
