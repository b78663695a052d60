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

/**
 * One cache file per bundle build, Node version and command: each command compiles different
 * parts of the bundle, and V8 keeps what the run that wrote the cache compiled.
 */
const cacheFile = (dir: string, argv: ReadonlyArray<string>): string => {
  const bundle = statSync(Bundle)
  const key = [Version, bundle.size, bundle.mtimeMs, process.version, process.arch].join(":")
  const command = /^[a-z][a-z-]{0,31}$/.test(argv[2] ?? "") ? argv[2] : "none"
  return path.join(dir, `${command}-${createHash("sha256").update(key).digest("hex").slice(0, 16)}.v8`)
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
 * Written whole (temp file, then rename), so that a reader never sees half of it. The caches of
 * other builds (an upgrade, a rebuild) are removed, so that they do not pile up.
 */
const writeCache = (file: string, data: Buffer) => {
  const temp = `${file}.${process.pid}.tmp`
  try {
    writeFileSync(temp, data, { mode: 0o600 })
    renameSync(temp, file)
    const build = file.slice(file.lastIndexOf("-"))
    const dir = path.dirname(file)
    for (const name of readdirSync(dir)) {
      if (name.endsWith(".v8") && !name.endsWith(build)) unlinkSync(path.join(dir, name))
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
