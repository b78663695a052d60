#!/usr/bin/env bash
# Installs the pinned Claude Code and Codex releases (fixtures/agent-clis.json) into a cache
# folder outside the project, once per pair of versions, and prints that folder. The real-CLI
# suite (test/e2e/agentClis.test.ts) and scripts/record-cli-fixtures.ts find them there.
#
# Install scripts are off, then Claude Code's own postinstall is run by hand: it copies the
# native binary from its platform package (already downloaded, it fetches nothing) over the
# bin/claude.exe placeholder. Nothing else from the packages runs at install time.
set -euo pipefail
cd "$(dirname "$0")/.."

pins=$(node -e '
  const { packages } = require("./fixtures/agent-clis.json")
  console.log(Object.entries(packages).map(([name, version]) => `${name}@${version}`).join(" "))
')
cache="${RELAYKEEP_AGENT_CLIS:-${XDG_CACHE_HOME:-$HOME/.cache}/relaykeep/agent-clis}"
# One folder per pair of versions, e.g. claude-code-2.1.332_codex-0.171.0.
folder="$cache/$(echo "$pins" | sed -E 's#(@[a-z-]+/)?([a-z-]+)@#\2-#g; s# #_#g')"

installed() {
  [ -x "$folder/node_modules/.bin/codex" ] && "$folder/node_modules/.bin/claude" --version >/dev/null 2>&1
}
if ! installed; then
  rm -rf "$folder.partial"
  mkdir -p "$folder.partial"
  # shellcheck disable=SC2086 # one word per package
  npm install --prefix "$folder.partial" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error $pins >&2
  (cd "$folder.partial/node_modules/@anthropic-ai/claude-code" && node install.cjs >&2)
  rm -rf "$folder"
  mv "$folder.partial" "$folder"
fi
echo "$folder"
