/** The TaskStore port in memory: one `Ref` that lives as long as the layer. */
import { Layer } from "effect"
import type { Host } from "../../services/Host.js"
import { TaskStore } from "../../services/TaskStore.js"
import type { MemoryStoreOptions } from "./MemoryTaskStore.js"
import { makeMemoryTaskStore } from "./MemoryTaskStore.js"

/** A store that lives as long as the layer: tests, and library users who want no disk. */
export const memoryTaskStoreLayer = (options?: MemoryStoreOptions): Layer.Layer<TaskStore, never, Host> =>
  Layer.effect(TaskStore, makeMemoryTaskStore(options))
