/** Building stores for tests: a fresh store per test, in memory or in a scoped temp directory. */
import { FileSystem } from "@effect/platform"
import * as NodeContext from "@effect/platform-node/NodeContext"
import type { Scope } from "effect"
import { Context, Effect, Layer } from "effect"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"

export type HostOptions = Parameters<typeof Host.layerTest>[0]

/** Build a layer in the current scope and take one service out of it. */
export const buildService = <I, S, E>(tag: Context.Tag<I, S>, layer: Layer.Layer<I, E>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, tag))

export const memoryStore = (host: HostOptions = {}): Effect.Effect<TaskStoreShape, never, Scope.Scope> =>
  buildService(TaskStore, TaskStore.layerMemory().pipe(Layer.provide(Host.layerTest(host))))

/** A file store over `root`, as a process with the given identity would open it. */
export const fileStoreAt = (root: string, host: HostOptions = {}) =>
  buildService(
    TaskStore,
    TaskStore.layer({ root }).pipe(Layer.provide(Host.layerTest(host)), Layer.provide(NodeContext.layer))
  )

export const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped()).pipe(
  Effect.provide(NodeContext.layer)
)

/** A file store in a fresh temp directory, removed when the test's scope closes. */
export const fileStore = (host: HostOptions = {}) =>
  Effect.flatMap(tempDir, (root) => fileStoreAt(root, host))
