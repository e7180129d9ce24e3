/**
 * What the gateway runs with when there is no configuration file: providers from the well-known
 * API key variables, a small catalogue of their popular models, SQLite storage in ./data.
 */
import type { GatewayConfig } from "./Config.js"
import { decode } from "./Config.js"

const perMillion = (usd: number) => (usd / 1_000_000).toFixed(12).replace(/0+$/, "")

const endpoint = (provider: string, upstreamModel: string, prompt: number, completion: number, context: number) => ({
  provider,
  upstreamModel,
  pricing: { prompt: perMillion(prompt), completion: perMillion(completion), request: "0", image: "0" },
  contextLength: context,
  supportedParameters: ["tools", "tool_choice", "temperature", "top_p", "top_k", "stop", "max_tokens"],
  inputModalities: ["text", "image", "file"]
})

/** A configuration assembled from the environment alone. */
export const fromEnvironment = (env: Readonly<Record<string, string | undefined>>): GatewayConfig => {
  const providers: Record<string, unknown> = {}
  const models: Record<string, { name: string; endpoints: Array<unknown> }> = {}
  const add = (id: string, name: string, e: unknown) => {
    models[id] ??= { name, endpoints: [] }
    models[id].endpoints.push(e)
  }
  if (env.ANTHROPIC_API_KEY) {
    providers.anthropic = { kind: "anthropic", baseUrl: "https://api.anthropic.com", apiKey: env.ANTHROPIC_API_KEY }
    add("anthropic/claude-sonnet-4.5", "Claude Sonnet 4.5", endpoint("anthropic", "claude-sonnet-4-5", 3, 15, 200000))
    add("anthropic/claude-haiku-4.5", "Claude Haiku 4.5", endpoint("anthropic", "claude-haiku-4-5", 1, 5, 200000))
    add("anthropic/claude-opus-4.1", "Claude Opus 4.1", endpoint("anthropic", "claude-opus-4-1", 15, 75, 200000))
  }
  if (env.OPENAI_API_KEY) {
    providers.openai = { kind: "openai", baseUrl: "https://api.openai.com/v1", apiKey: env.OPENAI_API_KEY }
    add("openai/gpt-4.1", "GPT-4.1", endpoint("openai", "gpt-4.1", 2, 8, 1047576))
    add("openai/gpt-4o-mini", "GPT-4o mini", endpoint("openai", "gpt-4o-mini", 0.15, 0.6, 128000))
  }
  if (env.OPENROUTER_API_KEY) {
    providers.openrouter = { kind: "openai", baseUrl: "https://openrouter.ai/api/v1", apiKey: env.OPENROUTER_API_KEY }
    add(
      "anthropic/claude-sonnet-4.5",
      "Claude Sonnet 4.5",
      endpoint("openrouter", "anthropic/claude-sonnet-4.5", 3, 15, 200000)
    )
    add("openai/gpt-4o-mini", "GPT-4o mini", endpoint("openrouter", "openai/gpt-4o-mini", 0.15, 0.6, 128000))
  }
  return decode({ providers, models }, env).config
}
