/**
 * Starting the gateway from code, with a configuration object of your own instead of a file:
 * one OpenAI-compatible provider (a local vLLM, Ollama or llama.cpp server, say), one model, one key.
 *
 *   UPSTREAM_URL=http://127.0.0.1:11434/v1 GATEWAY_API_KEY=mg-dev node examples/node-server/dist/main.js
 */
import { Config, Gateway } from "@model-gateway/server"

/** The example's configuration: what a `gateway.config.json` would hold, as an object. */
export const exampleConfig = (env: Readonly<Record<string, string | undefined>>) =>
  Config.decode({
    server: { port: Number(env.PORT ?? 8080) },
    storage: "memory:",
    providers: {
      local: { kind: "openai", baseUrl: env.UPSTREAM_URL ?? "http://127.0.0.1:11434/v1", apiKey: env.UPSTREAM_API_KEY }
    },
    models: {
      "local/llama": {
        name: "Llama on this machine",
        endpoints: [{
          provider: "local",
          upstreamModel: env.UPSTREAM_MODEL ?? "llama3.2",
          pricing: { prompt: "0", completion: "0" }
        }]
      }
    },
    keys: [{ key: env.GATEWAY_API_KEY ?? "mg-dev", management: true }]
  }).config

const isMain = import.meta.url === `file://${process.argv[1]}`
if (isMain) {
  const running = await Gateway.startServer(exampleConfig(process.env))
  console.log(`gateway on ${running.url}/v1 (model local/llama)`)
  process.once("SIGTERM", () => void running.close())
  process.once("SIGINT", () => void running.close())
}
