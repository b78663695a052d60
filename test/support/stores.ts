/** Building stores for tests: a fresh store per test, in memory or in a scoped temp directory. */
import { FileSystem } from "@effect/platform"
import { nodeContextLayer } from "../../src/platform/nodeFiles.js"
import * as NodePath from "@effect/platform-node/NodePath"
import type { Scope } from "effect"
import { Context, Effect, Layer } from "effect"
import { ClientRequestId } from "../../src/domain/ids.js"
import type { JsonObject, Receipt } from "../../src/domain/Task.js"
import { Host } from "../../src/services/Host.js"
import { TaskStore } from "../../src/services/TaskStore.js"
import type { TaskStoreShape } from "../../src/services/TaskStore.js"
import * as FaultyFileSystem from "./FaultyFileSystem.js"
import { FaultPlan } from "./FaultyFileSystem.js"
import { memoryTaskStoreLayer } from "../../src/store/memory/layer.js"
import { fileTaskStoreLayer } from "../../src/store/file/layer.js"

export type HostOptions = Parameters<typeof Host.layerTest>[0]

/** Build a layer in the current scope and take one service out of it. */
export const buildService = <I, S, E>(tag: Context.Tag<I, S>, layer: Layer.Layer<I, E>) =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, tag))

export const memoryStore = (host: HostOptions = {}): Effect.Effect<TaskStoreShape, never, Scope.Scope> =>
  buildService(TaskStore, memoryTaskStoreLayer().pipe(Layer.provide(Host.layerTest(host))))

/**
 * The store opens its root on its first operation (layout, reboot reconciliation, temp sweep,
 * secret). Tests that mean "a process opened the root" run one that repairs nothing: a check.
 */
const opened = <E, R>(store: Effect.Effect<TaskStoreShape, E, R>) => Effect.tap(store, (s) => s.check)

/** A file store over `root`, opened as a process with the given identity would open it. */
export const fileStoreAt = (root: string, host: HostOptions = {}) =>
  opened(
    buildService(
      TaskStore,
      fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layerTest(host)), Layer.provide(nodeContextLayer))
    )
  )

/**
 * A file store over `root` opened as this very process on this machine (the real Host), so a
 * CLI process spawned on the same root agrees on the boot id and does not rebuild the index.
 */
export const hostFileStoreAt = (root: string) =>
  opened(
    buildService(
      TaskStore,
      fileTaskStoreLayer({ root }).pipe(Layer.provide(Host.layer), Layer.provide(nodeContextLayer))
    )
  )

/** Submit tasks in-process through the real file store: far faster than one CLI process each. */
export const seedTasks = (
  root: string,
  requests: ReadonlyArray<{ readonly id: string; readonly payload: JsonObject }>
): Promise<ReadonlyArray<Receipt>> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(hostFileStoreAt(root), (store) =>
        Effect.forEach(requests, (request) =>
          store.submit({ clientRequestId: ClientRequestId.make(request.id), payload: request.payload })
        )
      )
    )
  )

export const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped()).pipe(
  Effect.provide(nodeContextLayer)
)

/** A file store in a fresh temp directory, removed when the test's scope closes. */
export const fileStore = (host: HostOptions = {}) =>
  Effect.flatMap(tempDir, (root) => fileStoreAt(root, host))

/** A file store over `root` on a given FileSystem (a faulty one, say), with the real Path. */
export const fileStoreOn = <E>(
  root: string,
  host: HostOptions,
  fileSystem: Layer.Layer<FileSystem.FileSystem, E>
) =>
  opened(
    buildService(
      TaskStore,
      fileTaskStoreLayer({ root }).pipe(
        Layer.provide(Host.layerTest(host)),
        Layer.provide(NodePath.layer),
        Layer.provide(fileSystem)
      )
    )
  )

/** A file store over `root` on its own fault-injecting FileSystem, and the plan that drives it. */
export const faultyFileStoreAt = (root: string, host: HostOptions = {}) =>
  Effect.gen(function* () {
    const fileSystem = yield* Layer.build(FaultyFileSystem.layer)
    const store = yield* fileStoreOn(root, host, Layer.succeedContext(fileSystem))
    return { store, plan: Context.get(fileSystem, FaultPlan) }
  })
