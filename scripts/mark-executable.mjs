// The bins must be executable straight after `npm ci` (which runs `prepare`, hence this build).
import { chmodSync, readdirSync } from "node:fs"

for (const name of readdirSync("dist/bin")) {
  if (name.endsWith(".js")) chmodSync(`dist/bin/${name}`, 0o755)
}
