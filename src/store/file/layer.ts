/** The TaskStore port over the file store: the default, embedded store. */
import type { FileSystem, Path } from "@effect/platform"
import { Layer } from "effect"
import type { StorageError } from "../../domain/errors.js"
import type { Host } from "../../services/Host.js"
import { TaskStore } from "../../services/TaskStore.js"
import { fileLockLayer } from "./FileLock.js"
import type { FileStoreOptions } from "./FileTaskStore.js"
import { makeFileTaskStore } from "./FileTaskStore.js"

/** The file store under `options.root`, with its own lock directory (`<root>/locks`). */
export const fileTaskStoreLayer = (
  options: FileStoreOptions
): Layer.Layer<TaskStore, StorageError, FileSystem.FileSystem | Path.Path | Host> =>
  Layer.scoped(TaskStore, makeFileTaskStore(options)).pipe(
    Layer.provide(fileLockLayer(`${options.root.replace(/\/+$/, "")}/locks`))
  )
