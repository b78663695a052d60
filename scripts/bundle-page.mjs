// Bundle the dashboard's page into dist/page/: index.html, app.js and app.css, served by
// `relaykeep dashboard` from the package itself (no CDN, nothing fetched at run time).
// Minified, without a source map: the sources are small and readable in src/dashboard/page/.
import { build } from "esbuild"
import { copyFileSync, mkdirSync } from "node:fs"

const source = "src/dashboard/page"
const out = "dist/page"

const common = {
  bundle: true,
  minify: true,
  sourcemap: false,
  legalComments: "none",
  target: ["chrome110", "firefox110", "safari16"],
  logLevel: "warning"
}

mkdirSync(out, { recursive: true })
await build({
  ...common,
  entryPoints: [`${source}/main.ts`],
  outfile: `${out}/app.js`,
  format: "iife",
  platform: "browser"
})
await build({ ...common, entryPoints: [`${source}/app.css`], outfile: `${out}/app.css` })
copyFileSync(`${source}/index.html`, `${out}/index.html`)
