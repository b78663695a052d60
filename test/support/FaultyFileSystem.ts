/**
 * A FileSystem for failure-injection tests: the real Node file system, wrapped so that a plan
 * held in a Ref can fail or tear the Nth write, fsync, rename, link or remove, or "crash" the
 * process after its Nth mutating call (the disk keeps what was done; every later call fails,
 * finalizers included, as if the process had died there).
 *
 * A test first arms `None` and runs an operation once to learn its counts, then re-runs it on a
 * fresh root with a fault at each index 1..N. A hold stops one call before it runs, so that a
 * test can make another process act at exactly that point.
 */
import { FileSystem } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { SystemError } from "@effect/platform/Error"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { Context, Deferred, Effect, Layer, Ref, Stream } from "effect"

/** The operation classes a fault can target. `write` covers File.write, File.writeAll and writeFile. */
export type Operation = "write" | "sync" | "rename" | "link" | "remove"
export const Operations: ReadonlyArray<Operation> = ["write", "sync", "rename", "link", "remove"]
export type Errno = "ENOSPC" | "EIO"

export type Fault =
  | { readonly _tag: "None" }
  | { readonly _tag: "Fail"; readonly operation: Operation; readonly nth: number; readonly errno: Errno }
  /** Write the first half of the Nth write's bytes, then fail; with `crash`, the process dies there. */
  | { readonly _tag: "Tear"; readonly nth: number; readonly crash: boolean }
  /** The Nth mutating call happens; every call after it fails. 0: dead before the first. */
  | { readonly _tag: "CrashAfter"; readonly mutations: number }

export const None: Fault = { _tag: "None" }
export type FailFault = Extract<Fault, { readonly _tag: "Fail" }>

export type Counts = Readonly<Record<Operation, number>> & {
  /** Every call that changes the disk: the classes above, creating opens, mkdir, truncate, … */
  readonly mutations: number
}

/** One mutating call, in order: what a test can inspect to see what a process did. */
export interface Entry {
  readonly kind: Operation | "mutation"
  readonly method: string
  readonly path: string
}

export class FaultPlan extends Context.Tag("relaykeep-test/FaultPlan")<
  FaultPlan,
  {
    /** Forget counts, journal and crash, and count from zero under `fault`. */
    readonly arm: (fault: Fault) => Effect.Effect<void>
    readonly counts: Effect.Effect<Counts>
    /** Whether the armed fault has happened (a crash counts once the process is dead). */
    readonly fired: Effect.Effect<boolean>
    readonly journal: Effect.Effect<ReadonlyArray<Entry>>
    /** Stop the Nth call of `operation` before it runs, until released (survives `arm`). */
    readonly holdAt: (operation: Operation, nth: number) => Effect.Effect<Hold>
  }
>() {}

/** `reached` completes when the held call is reached (it has not run); completing `release` lets it run. */
export interface Hold {
  readonly reached: Deferred.Deferred<void>
  readonly release: Deferred.Deferred<void>
}

type HoldPoint = Hold & { readonly operation: Operation; readonly nth: number }

type Kind = Operation | "mutation" | "read"
type Verdict =
  | { readonly _tag: "Run" }
  | { readonly _tag: "Fail"; readonly errno: Errno; readonly why: string }
  | { readonly _tag: "Tear" }

interface State {
  readonly fault: Fault
  readonly counts: Counts
  readonly fired: boolean
  readonly crashed: boolean
  readonly journal: ReadonlyArray<Entry>
}

const fresh = (fault: Fault): State => ({
  fault,
  counts: { write: 0, sync: 0, rename: 0, link: 0, remove: 0, mutations: 0 },
  fired: fault._tag === "CrashAfter" && fault.mutations === 0,
  crashed: fault._tag === "CrashAfter" && fault.mutations === 0,
  journal: []
})

const run: Verdict = { _tag: "Run" }
const dead: Verdict = { _tag: "Fail", errno: "EIO", why: "the process has crashed (injected)" }

/** Count one call and decide its fate. Pure, so that Ref.modify keeps it atomic. */
const decide = (state: State, kind: Kind, method: string, path: string): readonly [Verdict, State] => {
  if (state.crashed) return [dead, state]
  if (kind === "read") return [run, state]
  const entry: Entry = { kind, method, path }
  const bump = (operation: Operation) => state.counts[operation] + (kind === operation ? 1 : 0)
  const counts: Counts = {
    write: bump("write"),
    sync: bump("sync"),
    rename: bump("rename"),
    link: bump("link"),
    remove: bump("remove"),
    mutations: state.counts.mutations + 1
  }
  const next = { ...state, counts, journal: [...state.journal, entry] }
  const { fault } = state
  if (fault._tag === "Fail" && kind === fault.operation && counts[kind] === fault.nth)
    return [
      { _tag: "Fail", errno: fault.errno, why: "injected" },
      { ...next, fired: true }
    ]
  if (fault._tag === "Tear" && kind === "write" && counts.write === fault.nth)
    return [{ _tag: "Tear" }, { ...next, fired: true, crashed: fault.crash }]
  if (fault._tag === "CrashAfter" && counts.mutations === fault.mutations)
    return [run, { ...next, fired: true, crashed: true }]
  return [run, next]
}

const injected = (method: string, path: string, errno: Errno, why: string) =>
  new SystemError({
    module: "FileSystem",
    method,
    reason: "Unknown",
    pathOrDescriptor: path,
    description: `${errno}: ${errno === "ENOSPC" ? "no space left on device" : "input/output error"} (${why})`
  })

/** Wrap `real`: every call asks the plan first. */
const make = (
  real: FileSystem.FileSystem,
  state: Ref.Ref<State>,
  holds: Ref.Ref<ReadonlyArray<HoldPoint>>
): FileSystem.FileSystem => {
  const waitAt = (kind: Kind, index: number) =>
    Effect.flatMap(Ref.get(holds), (points) => {
      const point = points.find((p) => p.operation === kind && p.nth === index)
      return point === undefined
        ? Effect.void
        : Effect.zipRight(Deferred.succeed(point.reached, undefined), Deferred.await(point.release))
    })
  /** Count the call, wait at its hold point if it has one, and return its fate. */
  const step = (kind: Kind, method: string, path: string): Effect.Effect<Verdict> =>
    Effect.flatMap(
      Ref.modify(state, (s) => {
        const [verdict, next] = decide(s, kind, method, path)
        const index = kind === "read" || kind === "mutation" || s.crashed ? 0 : next.counts[kind]
        return [{ verdict, index }, next]
      }),
      ({ verdict, index }) => Effect.as(waitAt(kind, index), verdict)
    )
  const gate = (kind: Kind, method: string, path: string): Effect.Effect<void, PlatformError> =>
    Effect.flatMap(step(kind, method, path), (verdict): Effect.Effect<void, PlatformError> =>
      verdict._tag === "Fail" ? Effect.fail(injected(method, path, verdict.errno, verdict.why)) : Effect.void
    )
  const guard =
    (kind: Kind, method: string) =>
    <A, E, R>(path: string, effect: Effect.Effect<A, E, R>) =>
      Effect.zipRight(gate(kind, method, path), effect)
  /** A write, which a Tear cuts to its first half before failing. */
  const writing = <A>(
    method: string,
    path: string,
    bytes: Uint8Array,
    write: (bytes: Uint8Array) => Effect.Effect<A, PlatformError>
  ): Effect.Effect<A, PlatformError> =>
    Effect.flatMap(step("write", method, path), (verdict) => {
      if (verdict._tag === "Fail") return Effect.fail(injected(method, path, verdict.errno, verdict.why))
      if (verdict._tag === "Run") return write(bytes)
      const half = bytes.subarray(0, Math.floor(bytes.length / 2))
      return Effect.zipRight(write(half), Effect.fail(injected(method, path, "EIO", "torn write, injected")))
    })

  const wrapFile = (file: FileSystem.File, path: string): FileSystem.File => ({
    [FileSystem.FileTypeId]: FileSystem.FileTypeId,
    fd: file.fd,
    stat: guard("read", "stat")(path, file.stat),
    seek: (offset, from) => file.seek(offset, from),
    sync: guard("sync", "sync")(path, file.sync),
    read: (buffer) => guard("read", "read")(path, file.read(buffer)),
    readAlloc: (size) => guard("read", "readAlloc")(path, file.readAlloc(size)),
    truncate: (length) => guard("mutation", "truncate")(path, file.truncate(length)),
    write: (buffer) => writing("write", path, buffer, (bytes) => file.write(bytes)),
    writeAll: (buffer) => writing("writeAll", path, buffer, (bytes) => file.writeAll(bytes))
  })

  const reads = (method: string) => guard("read", method)
  const mutates = (method: string) => guard("mutation", method)
  return FileSystem.make({
    access: (path, options) => reads("access")(path, real.access(path, options)),
    copy: (from, to, options) => mutates("copy")(to, real.copy(from, to, options)),
    copyFile: (from, to) => mutates("copyFile")(to, real.copyFile(from, to)),
    chmod: (path, mode) => mutates("chmod")(path, real.chmod(path, mode)),
    chown: (path, uid, gid) => mutates("chown")(path, real.chown(path, uid, gid)),
    link: (from, to) => guard("link", "link")(to, real.link(from, to)),
    makeDirectory: (path, options) => mutates("makeDirectory")(path, real.makeDirectory(path, options)),
    makeTempDirectory: (options) => mutates("makeTempDirectory")("", real.makeTempDirectory(options)),
    makeTempDirectoryScoped: (options) =>
      mutates("makeTempDirectoryScoped")("", real.makeTempDirectoryScoped(options)),
    makeTempFile: (options) => mutates("makeTempFile")("", real.makeTempFile(options)),
    makeTempFileScoped: (options) => mutates("makeTempFileScoped")("", real.makeTempFileScoped(options)),
    // Opening with a creating flag changes the disk (O_CREAT, O_TRUNC); "r" and "r+" do not.
    open: (path, options) =>
      guard(options?.flag === undefined || options.flag.startsWith("r") ? "read" : "mutation", "open")(
        path,
        Effect.map(real.open(path, options), (file) => wrapFile(file, path))
      ),
    readDirectory: (path, options) => reads("readDirectory")(path, real.readDirectory(path, options)),
    readFile: (path) => reads("readFile")(path, real.readFile(path)),
    readLink: (path) => reads("readLink")(path, real.readLink(path)),
    realPath: (path) => reads("realPath")(path, real.realPath(path)),
    remove: (path, options) => guard("remove", "remove")(path, real.remove(path, options)),
    rename: (from, to) => guard("rename", "rename")(to, real.rename(from, to)),
    stat: (path) => reads("stat")(path, real.stat(path)),
    symlink: (from, to) => mutates("symlink")(to, real.symlink(from, to)),
    truncate: (path, length) => mutates("truncate")(path, real.truncate(path, length)),
    utimes: (path, atime, mtime) => mutates("utimes")(path, real.utimes(path, atime, mtime)),
    watch: (path, options) =>
      Stream.unwrap(Effect.as(gate("read", "watch", path), real.watch(path, options))),
    writeFile: (path, data, options) =>
      writing("writeFile", path, data, (bytes) => real.writeFile(path, bytes, options))
  })
}

/** The faulty FileSystem over Node's, and the plan that drives it. Starts unarmed (`None`). */
export const layer: Layer.Layer<FileSystem.FileSystem | FaultPlan> = Layer.effectContext(
  Effect.gen(function* () {
    const real = yield* FileSystem.FileSystem
    const state = yield* Ref.make(fresh(None))
    const holds = yield* Ref.make<ReadonlyArray<HoldPoint>>([])
    const plan = FaultPlan.of({
      arm: (fault) => Ref.set(state, fresh(fault)),
      counts: Ref.get(state).pipe(Effect.map((s) => s.counts)),
      fired: Ref.get(state).pipe(Effect.map((s) => s.fired)),
      journal: Ref.get(state).pipe(Effect.map((s) => s.journal)),
      holdAt: (operation, nth) =>
        Effect.gen(function* () {
          const hold = { reached: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
          yield* Ref.update(holds, (points) => [...points, { ...hold, operation, nth }])
          return hold
        })
    })
    return Context.make(FileSystem.FileSystem, make(real, state, holds)).pipe(Context.add(FaultPlan, plan))
  })
).pipe(Layer.provide(NodeFileSystem.layer))
