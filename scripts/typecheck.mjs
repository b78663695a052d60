#!/usr/bin/env node
// The type-check and the Effect diagnostics of one tsconfig in one TypeScript program.
//
// `effect-language-service diagnostics --project` builds a project service per 50 files and
// reopens each file, so its type checker starts over again and again: 137 s on this project,
// where `tsc --noEmit` takes 22 s. The rules it runs are the ones the package also ships as a
// program transformer (`@effect/language-service/transform.js`, the entry `ts-patch` loads),
// and that entry takes any program: here the one the type-check already built, so every rule
// shares its checker. Errors and warnings fail, as `diagnostics --strict` does; messages and
// suggestions, which `--strict` lets pass, are not reported by the transformer.
//
// Usage: node scripts/typecheck.mjs [tsconfig.json] [--no-effect]
import { createRequire } from "node:module"
import { performance } from "node:perf_hooks"
import process from "node:process"
import ts from "typescript"

const require = createRequire(import.meta.url)
const args = process.argv.slice(2)
const configPath = args.find((arg) => !arg.startsWith("--")) ?? "tsconfig.json"
const withEffect = !args.includes("--no-effect")

const host = {
  getCanonicalFileName: (fileName) => fileName,
  getCurrentDirectory: ts.sys.getCurrentDirectory,
  getNewLine: () => ts.sys.newLine
}
const report = (diagnostics) => {
  if (diagnostics.length > 0) process.stderr.write(ts.formatDiagnostics(diagnostics, host))
}

const configErrors = []
const config = ts.getParsedCommandLineOfConfigFile(configPath, undefined, {
  ...ts.sys,
  onUnRecoverableConfigFileDiagnostic: (diagnostic) => configErrors.push(diagnostic)
})
if (config === undefined || configErrors.length > 0 || config.errors.length > 0) {
  report([...configErrors, ...(config?.errors ?? [])])
  process.exit(2)
}

const started = performance.now()
const program = ts.createProgram({
  rootNames: config.fileNames,
  options: config.options,
  projectReferences: config.projectReferences
})
const typeErrors = ts.getPreEmitDiagnostics(program)
report(typeErrors)

const effectFindings = []
const ownFiles = program
  .getSourceFiles()
  .filter((file) => !file.isDeclarationFile && !program.isSourceFileFromExternalLibrary(file))
const pluginConfig = (config.options.plugins ?? []).find(
  (plugin) => plugin.name === "@effect/language-service"
)
if (withEffect && pluginConfig !== undefined) {
  const transform = require("@effect/language-service/transform.js").default
  const visit = transform(program, pluginConfig, {
    ts,
    addDiagnostic: (diagnostic) => effectFindings.push(diagnostic)
  })(undefined)
  for (const file of ownFiles) visit(file)
  report(effectFindings)
}

const seconds = ((performance.now() - started) / 1000).toFixed(1)
const effectPart =
  withEffect && pluginConfig !== undefined ? `, ${effectFindings.length} Effect findings` : ""
process.stderr.write(
  `${configPath}: ${ownFiles.length} files, ${typeErrors.length} type errors${effectPart} (${seconds} s)\n`
)
process.exit(typeErrors.length > 0 || effectFindings.length > 0 ? 1 : 0)
