#!/usr/bin/env bash
# Runs the demo, then the end-to-end MCP and worker suites, on another Node.js release: the
# one whose `node` is in the folder given (scripts/install-node.sh prints it). The checkout
# must be built (`npm run build`); node_modules holds no native add-on, so the install made
# by the machine's Node serves every release. Writes vitest's JSON report where
# RELAYKEEP_VITEST_JSON says, as `npm test` does.
#
# Usage: scripts/test-node-release.sh NODE_BIN_FOLDER
set -uo pipefail
cd "$(dirname "$0")/.."

bin="${1:?usage: $0 NODE_BIN_FOLDER}"
export PATH="$bin:$PATH"
echo "Node.js $(node --version): demo, then the end-to-end MCP and worker suites"

timeout 300 node dist/bin/relaykeep.js demo || {
  echo "the demo failed on Node.js $(node --version)"
  exit 1
}

# The suites that start the built bins (MCP servers over stdio, watching workers, the CLI):
# each child runs on this same node (the tests spawn process.execPath).
node node_modules/vitest/vitest.mjs run --project main \
  test/e2e/mcp \
  test/e2e/reliability.test.ts \
  test/e2e/concurrency.test.ts \
  test/e2e/cli.test.ts \
  test/e2e/commands.test.ts \
  test/e2e/launch.test.ts
