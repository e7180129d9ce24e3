import { fileURLToPath } from "node:url"
import { defineConfig } from "vitest/config"

const src = (pkg: string) => fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url))

export default defineConfig({
  resolve: {
    alias: {
      "@model-gateway/core": src("core"),
      "@model-gateway/http-adapter": src("http-adapter"),
      "@model-gateway/provider-adapters": src("provider-adapters"),
      "@model-gateway/storage-memory": src("storage-memory"),
      "@model-gateway/storage-sql": src("storage-sql"),
      "@model-gateway/server": src("server")
    }
  },
  test: {
    include: ["packages/*/test/**/*.test.ts", "examples/*/test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 30_000
  }
})
