// Bundle the CLI into one CommonJS file, dist/bundle/relaykeep.cjs, that the bins run through
// src/bin/launch.ts. One file loads faster than the ~300 modules it replaces, and modules the
// code imports dynamically (the MCP servers, PostgreSQL, the HTTP client, the providers) are
// initialised only by the commands that use them.
import { build } from "esbuild"

const result = await build({
  entryPoints: ["src/bin/main.ts"],
  outfile: "dist/bundle/relaykeep.cjs",
  bundle: true,
  platform: "node",
  target: "node20",
  format: "cjs",
  // Smaller is faster to read and to compile; the source map gives stack traces their names
  // back (node --enable-source-maps).
  minify: true,
  sourcemap: "linked",
  // ASCII only (esbuild escapes the rest), so the launcher can read it as one-byte text.
  charset: "ascii",
  // Licence notices of the bundled packages go beside it, in relaykeep.cjs.LEGAL.txt.
  legalComments: "external",
  // Where the bundle sits, for the code that finds files beside it (dist/bundle/ mirrors dist/cli/).
  define: { "import.meta.url": "__bundleUrl" },
  banner: { js: 'var __bundleUrl = require("node:url").pathToFileURL(__filename).href;' },
  // Optional native speed-ups of dependencies: never installed by RelayKeep, never loaded.
  external: ["pg-native", "msgpackr-extract"],
  metafile: process.argv.includes("--metafile"),
  logLevel: "warning"
})

if (result.metafile) {
  const { writeFileSync } = await import("node:fs")
  writeFileSync("dist/bundle/meta.json", JSON.stringify(result.metafile))
}
