/**
 * Where a CLI task runs: the worker's `--work-dir`, or the `work_dir` a payload names, which must
 * lie inside one of the worker's `--allow-work-dir` roots once every symbolic link is resolved,
 * and must be an existing directory. The payload's directory is opened and judged through its
 * descriptor (the path the kernel gives for it), and the CLI is started in that descriptor, so
 * it runs in the very directory judged even if the path is replaced between the check and the
 * spawn. Anything else fails the task before anything starts.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import { Effect, Option } from "effect"
import type { Scope } from "effect"
import { InvalidPayload, ProviderUnavailable } from "../domain/errors.js"
import type { ProviderSettings } from "./settings.js"

/** The directory a task runs in: `cwd` to spawn in, `path` to name it by. */
export interface TaskDirectory {
  readonly cwd: string
  readonly path: string
}

const isAbsolute = (path: string) => path.startsWith("/")

/** The directory the CLIs run in: configured, absolute, an existing directory. */
export const checkWorkDir = (fs: FileSystem.FileSystem, provider: string, workDir: string | undefined) =>
  Effect.gen(function* () {
    const unavailable = (reason: string) => new ProviderUnavailable({ provider, reason })
    if (workDir === undefined) return yield* unavailable("no --work-dir is configured")
    if (!isAbsolute(workDir)) return yield* unavailable("--work-dir must be an absolute path")
    const dir = yield* fs
      .stat(workDir)
      .pipe(Effect.mapError(() => unavailable(`work dir ${workDir} does not exist`)))
    if (dir.type !== "Directory") return yield* unavailable(`work dir ${workDir} is not a directory`)
    return workDir
  })

/** `path` is `root` or below it (both without symbolic links). */
export const isInside = (path: string, root: string): boolean =>
  path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`)

/** Where the kernel shows this process's open descriptors; absent where there is no /proc. */
const DescriptorDir = "/proc/self/fd"

export const taskDirectory = (
  fs: FileSystem.FileSystem,
  provider: string,
  settings: Pick<ProviderSettings, "workDir" | "allowedWorkDirs">,
  requested: string | undefined
): Effect.Effect<TaskDirectory, InvalidPayload | ProviderUnavailable, Scope.Scope> =>
  Effect.gen(function* () {
    if (requested === undefined)
      return yield* Effect.map(checkWorkDir(fs, provider, settings.workDir), (dir) => ({
        cwd: dir,
        path: dir
      }))
    const refuse = (reason: string) => new InvalidPayload({ provider, reason: `work_dir: ${reason}` })
    if (settings.allowedWorkDirs.length === 0)
      return yield* refuse(
        "this worker runs every task in its own --work-dir; start it with --allow-work-dir DIR to let a payload choose a directory inside DIR"
      )
    if (!isAbsolute(requested)) return yield* refuse("must be an absolute path")
    const roots: Array<string> = []
    for (const root of settings.allowedWorkDirs) {
      const real = yield* Effect.option(fs.realPath(root))
      if (Option.isSome(real)) roots.push(real.value)
    }
    if (roots.length === 0)
      return yield* new ProviderUnavailable({ provider, reason: "no --allow-work-dir directory exists" })
    const inAllowedRoot = (path: string) => roots.some((root) => isInside(path, root))
    const real = yield* fs.realPath(requested).pipe(Effect.mapError(() => refuse("does not exist")))
    if (!inAllowedRoot(real))
      return yield* refuse("is not inside a directory this worker allows (--allow-work-dir)")
    const info = yield* fs.stat(real).pipe(Effect.mapError(() => refuse("does not exist")))
    if (info.type !== "Directory") return yield* refuse("is not a directory")
    if (!(yield* fs.exists(DescriptorDir).pipe(Effect.orElseSucceed(() => false))))
      return { cwd: real, path: real }
    // Pinned: the directory is opened, and what was opened is judged again by the path the kernel
    // gives for its descriptor. The CLI then starts in the descriptor (its child inherits it until
    // it execs), whatever happened to the path meanwhile.
    const opened = yield* fs.open(real, { flag: "r" }).pipe(Effect.mapError(() => refuse("cannot be opened")))
    const pinned = `${DescriptorDir}/${opened.fd}`
    const held = yield* fs.readLink(pinned).pipe(Effect.mapError(() => refuse("cannot be opened")))
    const heldInfo = yield* opened.stat.pipe(Effect.mapError(() => refuse("cannot be opened")))
    if (!inAllowedRoot(held) || heldInfo.type !== "Directory")
      return yield* refuse(
        "was replaced while it was checked; it is no longer a directory inside an allowed one"
      )
    return { cwd: pinned, path: held }
  })
