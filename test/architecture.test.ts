/**
 * The direction of imports (docs/architecture.md): domain ← services (ports) and platform/ ←
 * implementations (store/, providers/, mcp/, worker/) ← entrypoints (cli/, bin/, dashboard/). A
 * port names no implementation, no implementation names an entrypoint, the dashboard does not
 * borrow the CLI's or the MCP servers' code, only the entrypoints reach into mcp/, and no worker
 * module reaches into a provider. Every import is read with TypeScript's own scanner (static,
 * `export … from`, type-only and dynamic `import()` alike) and resolved against its file, so a
 * crossing cannot hide behind `./../` or a lazy import.
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import { FileSystem, Path } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import ts from "typescript"

const Platform = Layer.merge(NodeFileSystem.layer, NodePath.layer)

interface Crossing {
  readonly file: string
  readonly imports: string
}

/** Every `.ts` file under `dir` (relative to the repository), recursively. */
const sourcesUnder = (dir: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const names = yield* fs.readDirectory(dir, { recursive: true })
    return names
      .filter((name) => name.endsWith(".ts"))
      .map((name) => path.join(dir, name))
      .sort()
  })

/** The source files `file` imports, as repository paths; bare specifiers (packages) are left out. */
const importsOf = (file: string) =>
  Effect.gen(function* () {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const text = yield* fs.readFileString(file)
    const { importedFiles } = ts.preProcessFile(text, true, true)
    return importedFiles
      .map((reference) => reference.fileName)
      .filter((specifier) => specifier.startsWith("."))
      .map((specifier) => path.normalize(path.join(path.dirname(file), specifier)))
  })

/** The imports of the files under `from` that land in one of `forbidden` (folders under src/). */
const crossings = (from: ReadonlyArray<string>, forbidden: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const found: Array<Crossing> = []
    for (const file of from) {
      for (const target of yield* importsOf(file)) {
        const crossing = forbidden.some((folder) => target.startsWith(`src/${folder}/`))
        if (crossing && !found.some((seen) => seen.file === file && seen.imports === target)) {
          found.push({ file, imports: target })
        }
      }
    }
    return found
  })

const show = (found: ReadonlyArray<Crossing>) =>
  found.map((crossing) => `${crossing.file} imports ${crossing.imports}`).join("\n")

describe("the direction of imports", () => {
  it.effect("the scanner sees static, type-only, re-exported and dynamic imports", () =>
    Effect.sync(() => {
      const text = [
        `import type { A } from "../store/a.js"`,
        `import {`,
        `  B`,
        `} from "../providers/b.js"`,
        `export { C } from "../mcp/c.js"`,
        `const d = () => import("../cli/d.js")`,
        `/** a comment that says import and from "../worker/e.js" is not an import */`
      ].join("\n")
      const seen = ts.preProcessFile(text, true, true).importedFiles.map((reference) => reference.fileName)
      assert.deepStrictEqual(seen, ["../store/a.js", "../providers/b.js", "../mcp/c.js", "../cli/d.js"])
    })
  )

  it.effect("a port (src/services) imports no implementation and no entrypoint", () =>
    Effect.gen(function* () {
      const path = yield* Path.Path
      const ports = (yield* sourcesUnder("src/services")).filter(
        (file) => path.dirname(file) === "src/services"
      )
      assert.isAbove(ports.length, 5)
      const found = yield* crossings(ports, [
        "store",
        "providers",
        "mcp",
        "dashboard",
        "cli",
        "worker",
        "bin"
      ])
      assert.strictEqual(show(found), "")
    }).pipe(Effect.provide(Platform))
  )

  it.effect("the dashboard imports neither the CLI nor the MCP servers", () =>
    Effect.gen(function* () {
      const found = yield* crossings(yield* sourcesUnder("src/dashboard"), ["cli", "mcp", "bin"])
      assert.strictEqual(show(found), "")
    }).pipe(Effect.provide(Platform))
  )

  it.effect("no worker module imports a provider", () =>
    Effect.gen(function* () {
      const found = yield* crossings(yield* sourcesUnder("src/worker"), [
        "providers",
        "cli",
        "mcp",
        "dashboard",
        "bin"
      ])
      assert.strictEqual(show(found), "")
    }).pipe(Effect.provide(Platform))
  )

  it.effect("nothing outside src/mcp imports it but the entrypoints (cli/, bin/)", () =>
    Effect.gen(function* () {
      const outside: Array<string> = []
      for (const folder of [
        "domain",
        "services",
        "platform",
        "store",
        "providers",
        "worker",
        "broadcast",
        "dashboard"
      ]) {
        outside.push(...(yield* sourcesUnder(`src/${folder}`)))
      }
      assert.isAbove(outside.length, 50)
      const found = yield* crossings(outside, ["mcp"])
      assert.strictEqual(show(found), "")
    }).pipe(Effect.provide(Platform))
  )

  it.effect("no implementation imports an entrypoint (cli/, bin/, dashboard/)", () =>
    Effect.gen(function* () {
      const implementations: Array<string> = []
      for (const folder of ["platform", "store", "providers", "worker", "broadcast", "mcp"]) {
        implementations.push(...(yield* sourcesUnder(`src/${folder}`)))
      }
      const found = yield* crossings(implementations, ["cli", "bin", "dashboard"])
      assert.strictEqual(show(found), "")
    }).pipe(Effect.provide(Platform))
  )

  it.effect("src/platform (durable files, the root's trust, the environment) imports only the domain", () =>
    Effect.gen(function* () {
      const platform = yield* sourcesUnder("src/platform")
      assert.isAbove(platform.length, 2)
      const found = yield* crossings(platform, [
        "services",
        "store",
        "providers",
        "mcp",
        "worker",
        "dashboard",
        "cli",
        "bin"
      ])
      assert.strictEqual(show(found), "")
    }).pipe(Effect.provide(Platform))
  )

  it.effect("the domain imports no other layer", () =>
    Effect.gen(function* () {
      const found = yield* crossings(yield* sourcesUnder("src/domain"), [
        "services",
        "store",
        "providers",
        "mcp",
        "worker",
        "dashboard",
        "cli",
        "bin",
        "platform"
      ])
      assert.strictEqual(show(found), "")
    }).pipe(Effect.provide(Platform))
  )
})
