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
import path from "node:path"
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

const pluginConfig = (config.options.plugins ?? []).find(
  (plugin) => plugin.name === "@effect/language-service"
)
const runEffect = withEffect && pluginConfig !== undefined

// The transformer answers "no findings" when its engine fails, so a probe with one known finding
// (a floating Effect) rides along in the program, where it is looked for and then left out: a
// run that does not find it fails instead of passing in silence.
const probePath = path.resolve(path.dirname(configPath), "src", "__effect-diagnostics-probe__.ts")
const probeSource =
  'import { Effect } from "effect"\nexport const probe = () => {\n  Effect.log("floating")\n}\n'
const isProbe = (diagnostic) =>
  diagnostic.file !== undefined && path.resolve(diagnostic.file.fileName) === probePath
const compilerHost = ts.createCompilerHost(config.options)
const readSource = compilerHost.getSourceFile.bind(compilerHost)
compilerHost.getSourceFile = (fileName, languageVersion, ...rest) =>
  path.resolve(fileName) === probePath
    ? ts.createSourceFile(fileName, probeSource, languageVersion, true)
    : readSource(fileName, languageVersion, ...rest)
const fileExists = compilerHost.fileExists.bind(compilerHost)
compilerHost.fileExists = (fileName) => path.resolve(fileName) === probePath || fileExists(fileName)

const started = performance.now()
const program = ts.createProgram({
  rootNames: runEffect ? [...config.fileNames, probePath] : config.fileNames,
  options: config.options,
  projectReferences: config.projectReferences,
  host: compilerHost
})
const typeErrors = ts.getPreEmitDiagnostics(program).filter((diagnostic) => !isProbe(diagnostic))
report(typeErrors)

const effectFindings = []
const ownFiles = program
  .getSourceFiles()
  .filter(
    (file) =>
      !file.isDeclarationFile &&
      !program.isSourceFileFromExternalLibrary(file) &&
      path.resolve(file.fileName) !== probePath
  )
let probeFindings = 0
if (runEffect) {
  const transform = require("@effect/language-service/transform.js").default
  const visit = transform(program, pluginConfig, {
    ts,
    addDiagnostic: (diagnostic) => {
      if (isProbe(diagnostic)) probeFindings += 1
      else effectFindings.push(diagnostic)
    }
  })(undefined)
  for (const file of [...ownFiles, program.getSourceFile(probePath)]) if (file !== undefined) visit(file)
  report(effectFindings)
  if (probeFindings === 0) {
    process.stderr.write(
      `${configPath}: the Effect diagnostics found nothing in a probe with a floating Effect: their engine did not run\n`
    )
    process.exit(1)
  }
}

const seconds = ((performance.now() - started) / 1000).toFixed(1)
const effectPart = runEffect ? `, ${effectFindings.length} Effect findings` : ""
process.stderr.write(
  `${configPath}: ${ownFiles.length} files, ${typeErrors.length} type errors${effectPart} (${seconds} s)\n`
)
process.exit(typeErrors.length > 0 || effectFindings.length > 0 ? 1 : 0)
