// @ts-check
import js from "@eslint/js"
import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["dist/", "node_modules/", "coverage/", "test-results/", "bench/results/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-non-null-assertion": "error",
      "@typescript-eslint/consistent-type-imports": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "no-console": "error"
    }
  },
  {
    // Entrypoints and fixtures talk to the terminal directly; library code logs through Effect.
    files: [
      "src/bin/**",
      "fixtures/**",
      "examples/**",
      "scripts/**",
      "bench/run.ts",
      "bench/profile.ts",
      "test/chaos/*.mjs"
    ],
    languageOptions: { globals: { process: "readonly", console: "readonly", Buffer: "readonly" } },
    rules: { "no-console": "off" }
  }
)
