import { defineConfig } from "vitest/config"

// CI asks for a JSON report beside the console one, to print `N passed, N failed`.
const jsonReport = process.env["RELAYKEEP_VITEST_JSON"]

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/support/pgGlobalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {})
  }
})
