// The server under test: the compiled gateway (packages/server/dist), memory storage, one
// Anthropic provider pointing at the fake upstream, one model, one key. Exactly what `startServer`
// runs in production, only the configuration differs.
import { Config, Gateway } from "@model-gateway/server"
import { serveChild } from "./child.mjs"
import { gatewayConfig } from "./fixtures.mjs"

const UPSTREAM_URL = process.env.UPSTREAM_URL
if (!UPSTREAM_URL) throw new Error("UPSTREAM_URL is not set")

await serveChild("gateway", async () => {
  const { config, warnings } = Config.decode(gatewayConfig(UPSTREAM_URL))
  for (const warning of warnings) console.error(`[bench/gateway] config warning: ${warning}`)
  // One log line per request, as in production (BENCH_REQUEST_LOG=0 turns it off, to measure what it costs).
  const requestLog = process.env.BENCH_REQUEST_LOG !== "0"
  const running = await Gateway.startServer(config, { host: "127.0.0.1", port: 0, requestLog })
  return { url: running.url, close: () => running.close(1_000) }
})
