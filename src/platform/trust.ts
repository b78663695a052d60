/**
 * Whether a data root may be trusted, checked as OpenSSH's StrictModes checks a key: the root,
 * every directory of its layout, and the files read as configuration must belong to this user
 * and be writable by nobody else, or another local user could plant tasks, configuration
 * (`claude_executable`) or a secret there. The directories above the root must not let anyone
 * else replace it: owned by this user or by root, and writable by others only with the sticky
 * bit (as `/tmp` is). Modes are never changed here, neither loosened nor tightened: the error says
 * what to run.
 */
import type { FileSystem, Path } from "@effect/platform"
import type { PlatformError } from "@effect/platform/Error"
import { Effect, Option } from "effect"
import { StorageError } from "../domain/errors.js"
import { isNotFound, toStorageError } from "./durable.js"

const GroupOrOtherWrite = 0o022
const Sticky = 0o1000
const RootUid = 0

export interface Trust {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  /** Whose files these must be; undefined where the platform has no uids (Windows). */
  readonly uid: number | undefined
}

const octal = (mode: number): string => (mode & 0o7777).toString(8).padStart(4, "0")

const refuse = (path: string, problem: string, fix: string) =>
  new StorageError({
    operation: "open",
    path,
    reason: `${problem}: another local user could change what RelayKeep runs. Fix it with \`${fix}\` (RelayKeep never changes the modes of what it did not create)`
  })

/** Stat `target`, or None when it does not exist. */
const statIfExists = (trust: Trust, target: string) =>
  trust.fs.stat(target).pipe(
    Effect.map(Option.some),
    Effect.catchIf(
      (error: PlatformError) => isNotFound(error),
      () => Effect.succeedNone
    ),
    Effect.mapError(toStorageError("stat", target))
  )

/**
 * Refuse `target` (a directory or a file of the root) when it exists and is not this user's or is
 * writable by its group or by others. A missing one is fine: it is created private.
 */
export const checkPrivate = (
  trust: Trust,
  target: string,
  kind: "Directory" | "File"
): Effect.Effect<void, StorageError> =>
  Effect.flatMap(statIfExists(trust, target), (found) => {
    if (Option.isNone(found)) return Effect.void
    const info = found.value
    const owner = Option.getOrUndefined(info.uid)
    const mode = kind === "Directory" ? "700" : "600"
    if (info.type !== kind)
      return Effect.fail(
        new StorageError({
          operation: "open",
          path: target,
          reason: `is a ${info.type.toLowerCase()}, where RelayKeep keeps a ${kind.toLowerCase()}`
        })
      )
    if (trust.uid !== undefined && owner !== undefined && owner !== trust.uid)
      return Effect.fail(
        refuse(
          target,
          `is owned by uid ${owner}, not by this user (uid ${trust.uid})`,
          `chown ${trust.uid} ${target} && chmod ${mode} ${target}`
        )
      )
    if ((info.mode & GroupOrOtherWrite) !== 0)
      return Effect.fail(
        refuse(
          target,
          `is writable by its group or by others (mode ${octal(info.mode)})`,
          `chmod ${mode} ${target}`
        )
      )
    return Effect.void
  })

/**
 * Refuse a root whose parent directories let another user replace it: each must be this user's
 * or root's, and writable by others only when sticky.
 */
const checkAncestors = (trust: Trust, real: string): Effect.Effect<void, StorageError> => {
  const ancestors: Array<string> = []
  for (let dir = trust.path.dirname(real); ; dir = trust.path.dirname(dir)) {
    ancestors.push(dir)
    if (trust.path.dirname(dir) === dir) break
  }
  return Effect.forEach(
    ancestors,
    (dir) =>
      Effect.flatMap(statIfExists(trust, dir), (found) => {
        if (Option.isNone(found)) return Effect.void
        const info = found.value
        const owner = Option.getOrUndefined(info.uid)
        const foreign =
          trust.uid !== undefined && owner !== undefined && owner !== trust.uid && owner !== RootUid
        if (foreign)
          return Effect.fail(
            refuse(
              dir,
              `holds the data root ${real} but is owned by uid ${owner}, who could replace it`,
              `mv ${real} <a directory of your own>`
            )
          )
        if ((info.mode & GroupOrOtherWrite) !== 0 && (info.mode & Sticky) === 0)
          return Effect.fail(
            refuse(
              dir,
              `holds the data root ${real} and is writable by others without the sticky bit (mode ${octal(info.mode)}), so anyone could replace the root`,
              `chmod go-w ${dir}`
            )
          )
        return Effect.void
      }),
    { discard: true }
  )
}

/**
 * Check a data root before it is used: the directories above it, the root itself, and then each
 * of `inside` (directories of its layout, then files). Nothing that is missing is an error.
 */
export const checkRoot = (
  trust: Trust,
  root: string,
  inside: { readonly directories?: ReadonlyArray<string>; readonly files?: ReadonlyArray<string> } = {}
): Effect.Effect<void, StorageError> =>
  Effect.gen(function* () {
    const real = yield* trust.fs.realPath(root).pipe(
      Effect.map(Option.some),
      Effect.catchIf(isNotFound, () => Effect.succeedNone),
      Effect.mapError(toStorageError("realpath", root))
    )
    const given = trust.path.resolve(root)
    // A root about to be created is created only where nobody else could replace it.
    if (Option.isNone(real)) return yield* checkAncestors(trust, given)
    // The path as given too: a symlinked root is only as safe as the directory holding the link.
    if (given !== real.value) yield* checkAncestors(trust, given)
    yield* checkAncestors(trust, real.value)
    yield* checkPrivate(trust, real.value, "Directory")
    for (const dir of inside.directories ?? []) yield* checkPrivate(trust, dir, "Directory")
    for (const file of inside.files ?? []) yield* checkPrivate(trust, file, "File")
  })
