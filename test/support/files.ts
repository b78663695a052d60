/** Real temp directories for end-to-end tests, and exact pictures of a data root on disk. */
import { afterAll } from "@effect/vitest"
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"

/** A maker of fresh temp directories, all removed after the calling file's tests. */
export const useTempDirs = (): (() => string) => {
  const made: Array<string> = []
  afterAll(() => {
    for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
  })
  return () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "relaykeep-e2e-"))
    made.push(dir)
    return dir
  }
}

/** Every entry under `root` by relative path: directories as "dir", files as their bytes (base64). */
export const snapshotTree = (root: string): Readonly<Record<string, string>> | null => {
  if (!fs.existsSync(root)) return null
  const entries: Record<string, string> = {}
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name)
      const relative = path.relative(root, full)
      if (entry.isDirectory()) {
        entries[`${relative}/`] = "dir"
        walk(full)
      } else entries[relative] = fs.readFileSync(full).toString("base64")
    }
  }
  walk(root)
  return Object.fromEntries(Object.entries(entries).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
}

/** Every directory and file under `root` (itself included) with its permission bits, e.g. "700". */
export const modesUnder = (root: string): ReadonlyArray<{ readonly path: string; readonly mode: string }> => {
  const found = [{ path: root, mode: permissions(root) }]
  for (const entry of fs.readdirSync(root, { withFileTypes: true, recursive: true })) {
    const full = path.join(entry.parentPath, entry.name)
    found.push({ path: full, mode: permissions(full) })
  }
  return found
}

const permissions = (file: string): string => (fs.statSync(file).mode & 0o777).toString(8)

/** The names in `<root>/tasks` that are records, i.e. end in `.json`. */
export const recordFiles = (root: string): ReadonlyArray<string> =>
  fs
    .readdirSync(path.join(root, "tasks"))
    .filter((name) => name.endsWith(".json"))
    .sort()

export const recordPath = (root: string, taskId: string): string => path.join(root, "tasks", `${taskId}.json`)

/** SHA-256 in hex, computed here rather than by the code under test. */
export const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")
