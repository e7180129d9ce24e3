/**
 * What the gateway runs with when there is no configuration file: providers from the well-known
 * API key variables, a small catalogue of their popular models, SQLite storage in ./data; and always
 * the local speech engine (`local/espeak-ng`), so that speech works offline with no key at all (unless its optional
 * package was left out: `npm install --omit=optional`).
 */
import { EspeakVoices, LocalSpeech } from "@model-gateway/provider-adapters"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { GatewayConfig } from "./Config.js"
import { decode } from "./Config.js"
import type { ProviderKeys } from "./Environment.js"

const perMillion = (usd: number) => (usd / 1_000_000).toFixed(12).replace(/0+$/, "")

const endpoint = (provider: string, upstreamModel: string, prompt: number, completion: number, context: number) => ({
  provider,
  upstreamModel,
  pricing: { prompt: perMillion(prompt), completion: perMillion(completion), request: "0", image: "0" },
  contextLength: context,
  supportedParameters: ["tools", "tool_choice", "temperature", "top_p", "top_k", "stop", "max_tokens"],
  inputModalities: ["text", "image", "file"]
})

/** The voices of OpenAI's speech models. */
const OPENAI_VOICES = ["alloy", "ash", "coral", "echo", "fable", "onyx", "nova", "sage", "shimmer"]

/** A configuration of the providers whose keys are given, with their popular models. */
export const configFor = (keys: ProviderKeys, localSpeech: boolean = LocalSpeech.installed()): GatewayConfig => {
  const env = {
    ANTHROPIC_API_KEY: Option.getOrUndefined(Option.map(keys.anthropic, Redacted.value)),
    OPENAI_API_KEY: Option.getOrUndefined(Option.map(keys.openai, Redacted.value)),
    OPENROUTER_API_KEY: Option.getOrUndefined(Option.map(keys.openrouter, Redacted.value))
  }
  const providers: Record<string, unknown> = {}
  const models: Record<string, { name: string; endpoints: Array<unknown>; [key: string]: unknown }> = {}
  if (localSpeech) {
    providers.local = { kind: "local-speech" }
    models["local/espeak-ng"] = {
      name: "eSpeak NG (local, offline)",
      outputModalities: ["audio"],
      voices: [...EspeakVoices.CATALOGUE_VOICES],
      endpoints: [{
        provider: "local",
        upstreamModel: "espeak-ng",
        pricing: { prompt: "0", completion: "0" },
        zdr: true
      }]
    }
  }
  const add = (id: string, name: string, e: unknown) => {
    models[id] ??= { name, endpoints: [] }
    models[id].endpoints.push(e)
  }
  const speech = (id: string, name: string, provider: string, upstreamModel: string, perCharacter: number) => {
    models[id] = {
      name,
      outputModalities: ["audio"],
      voices: OPENAI_VOICES,
      endpoints: [{
        provider,
        upstreamModel,
        pricing: { prompt: perMillion(perCharacter), completion: "0", request: "0", image: "0" }
      }]
    }
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
    // Speech is priced per input character (the endpoint's prompt price): $15 and $30 per million characters.
    speech("openai/tts-1", "TTS-1", "openai", "tts-1", 15)
    speech("openai/tts-1-hd", "TTS-1 HD", "openai", "tts-1-hd", 30)
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
  return decode({ providers, models }).config
}
