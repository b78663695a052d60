/**
 * How the bins start fast: they run one bundle of the whole CLI (`dist/bundle/relaykeep.cjs`,
 * built by scripts/bundle.mjs) and keep V8's compiled code for it in a private cache, so that
 * only the first run after an install or an upgrade pays for compiling it. This is what Node 22's
 * `module.enableCompileCache()` does; Node 20 lacks it, so it is done here with `node:vm`.
 *
 * The cache lives in `$XDG_CACHE_HOME/relaykeep/compile` (else `~/.cache/relaykeep/compile`), a
 * directory created 0700 and used only while it is a real directory owned by this user that no
 * one else can write: V8 trusts what it loads from there. RELAYKEEP_COMPILE_CACHE=off turns it
 * off. Any failure to read or write the cache only costs speed, never the command.
 */
import { createHash } from "node:crypto"
import {
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  writeFileSync
} from "node:fs"
import { createRequire } from "node:module"
import path from "node:path"
import { fileURLToPath } from "node:url"
import vm from "node:vm"
import { Version } from "../version.js"

const Bundle = fileURLToPath(new URL("../bundle/relaykeep.cjs", import.meta.url))

interface CliBundle {
  readonly main: (argv: ReadonlyArray<string>) => void
}

const isCliBundle = (exports: unknown): exports is CliBundle =>
  typeof exports === "object" && exports !== null && "main" in exports && typeof exports.main === "function"

/** The private cache directory, or undefined when there is none that is safe to use. */
const cacheDirectory = (): string | undefined => {
  const setting = process.env["RELAYKEEP_COMPILE_CACHE"]
  if (setting === "off" || setting === "0") return undefined
  const base =
    process.env["XDG_CACHE_HOME"] || (process.env["HOME"] && path.join(process.env["HOME"], ".cache"))
  if (!base || !path.isAbsolute(base)) return undefined
  const dir = path.join(base, "relaykeep", "compile")
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const stat = lstatSync(dir)
    const ownedByUs = process.getuid === undefined || stat.uid === process.getuid()
    if (!stat.isDirectory() || !ownedByUs || (stat.mode & 0o022) !== 0) return undefined
    return dir
  } catch {
    return undefined
  }
}

/** The part of a cache file's name that says which build of the bundle, and which Node, wrote it. */
const CacheName = /^[a-z][a-z-]{0,31}-([0-9a-f]{16})-([0-9a-f]{16})\.v8$/

/** The Node versions whose caches are kept beside each other (a shell's Node and a client's). */
const KeptRuntimes = 3

const hash16 = (parts: ReadonlyArray<string | number>) =>
  createHash("sha256").update(parts.join(":")).digest("hex").slice(0, 16)

/**
 * One cache file per bundle build, Node version and command (`<command>-<build>-<node>.v8`):
 * each command compiles different parts of the bundle, V8 keeps what the run that wrote the
 * cache compiled, and V8 rejects a cache another Node version wrote.
 */
const cacheFile = (dir: string, argv: ReadonlyArray<string>): string => {
  const bundle = statSync(Bundle)
  const build = hash16([Version, bundle.size, bundle.mtimeMs])
  const runtime = hash16([process.version, process.arch])
  const command = /^[a-z][a-z-]{0,31}$/.test(argv[2] ?? "") ? argv[2] : "none"
  return path.join(dir, `${command}-${build}-${runtime}.v8`)
}

const readCache = (file: string | undefined): Buffer | undefined => {
  if (file === undefined) return undefined
  try {
    return readFileSync(file)
  } catch {
    return undefined
  }
}

/**
 * The caches to remove once `file` is written: those of other builds (an upgrade, a rebuild)
 * and of any name this launcher does not write, so that they do not pile up; of this build's,
 * those of all but the Node versions that wrote last, so that a user whose shell and MCP
 * client run different Node versions keeps a cache for each instead of each run evicting the
 * other's.
 */
export const staleCaches = (
  file: string,
  present: ReadonlyArray<{ readonly name: string; readonly mtimeMs: number }>
): ReadonlyArray<string> => {
  const own = CacheName.exec(path.basename(file))
  if (own === null) return []
  const stale: Array<string> = []
  const ofThisBuild: Array<{ readonly name: string; readonly runtime: string }> = []
  /** The latest write of each Node version's caches; the runtime that just wrote is the newest. */
  const newest = new Map<string, number>([[own[2] ?? "", Number.POSITIVE_INFINITY]])
  for (const { name, mtimeMs } of present) {
    if (!name.endsWith(".v8")) continue
    const parsed = CacheName.exec(name)
    const runtime = parsed?.[2]
    if (parsed === null || parsed[1] !== own[1] || runtime === undefined) stale.push(name)
    else {
      ofThisBuild.push({ name, runtime })
      newest.set(runtime, Math.max(newest.get(runtime) ?? 0, mtimeMs))
    }
  }
  const kept = new Set(
    [...newest]
      .sort((a, b) => b[1] - a[1])
      .slice(0, KeptRuntimes)
      .map(([runtime]) => runtime)
  )
  for (const { name, runtime } of ofThisBuild) if (!kept.has(runtime)) stale.push(name)
  return stale
}

/** Written whole (temp file, then rename), so that a reader never sees half of it. */
const writeCache = (file: string, data: Buffer) => {
  const temp = `${file}.${process.pid}.tmp`
  try {
    writeFileSync(temp, data, { mode: 0o600 })
    renameSync(temp, file)
    const dir = path.dirname(file)
    const present = readdirSync(dir).flatMap((name) => {
      try {
        return [{ name, mtimeMs: statSync(path.join(dir, name)).mtimeMs }]
      } catch {
        return []
      }
    })
    for (const name of staleCaches(file, present)) {
      try {
        unlinkSync(path.join(dir, name))
      } catch {
        // Another run removed it first.
      }
    }
  } catch {
    // A full disk, a read-only home, a file another run removed first: only speed is lost.
  }
}

/** Run the CLI bundle with `argv` (as process.argv). */
export const launch = (argv: ReadonlyArray<string>): void => {
  const dir = cacheDirectory()
  const file = dir === undefined ? undefined : cacheFile(dir, argv)
  const cachedData = readCache(file)
  // The CommonJS wrapper, as Node's own loader would put around the bundle. The bundle is ASCII
  // (see scripts/bundle.mjs), which latin1 reads without decoding UTF-8.
  const source = `(function (exports, require, module, __filename, __dirname) { ${readFileSync(Bundle, "latin1")}\n})`
  const script = new vm.Script(source, {
    filename: Bundle,
    ...(cachedData === undefined ? {} : { cachedData }),
    importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER
  })
  if (file !== undefined && (cachedData === undefined || script.cachedDataRejected === true)) {
    // At exit the cache holds every function this run compiled, not just the top level.
    process.once("exit", () => writeCache(file, script.createCachedData()))
  }
  const module = { exports: {} }
  const wrapper: unknown = script.runInThisContext()
  if (typeof wrapper !== "function") throw new Error(`${Bundle} did not compile to a module`)
  wrapper.call(module.exports, module.exports, createRequire(Bundle), module, Bundle, path.dirname(Bundle))
  if (!isCliBundle(module.exports)) throw new Error(`${Bundle} does not export main`)
  module.exports.main(argv)
}
