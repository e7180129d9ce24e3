/**
 * The Upstream port for a whole gateway: one adapter per configured provider, chosen by the
 * endpoint's `provider`. Adapters (and their connection pools) are built once, at start-up.
 */
import { Upstream } from "@model-gateway/core"
import { Effect, Layer } from "effect"
import * as AnthropicUpstream from "./anthropic/AnthropicUpstream.js"
import type { Timeouts } from "./internal/Transport.js"
import * as OpenAiUpstream from "./openai/OpenAiUpstream.js"

/** How to reach one provider. */
export interface ProviderConfig {
  readonly kind: "anthropic" | "openai"
  readonly baseUrl: string
  readonly apiKey?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly timeouts?: Partial<Timeouts> | undefined
}

/** Builds the adapter for one provider. Add a provider kind here. */
export const adapterFor = (config: ProviderConfig): Upstream.UpstreamService => {
  switch (config.kind) {
    case "anthropic":
      return AnthropicUpstream.make(config)
    case "openai":
      return OpenAiUpstream.make(config)
  }
}

/** Routes each call to its endpoint's provider adapter. */
export const make = (
  providers: Readonly<Record<string, ProviderConfig | Upstream.UpstreamService>>
): Upstream.UpstreamService => {
  const adapters = new Map<string, Upstream.UpstreamService>()
  for (const [name, config] of Object.entries(providers)) {
    adapters.set(name, "kind" in config ? adapterFor(config) : config)
  }
  const unknown = (call: Upstream.MessagesCall) =>
    new Upstream.UpstreamError({
      kind: "unsupported",
      message: `no adapter is configured for provider '${call.endpoint.provider}'`
    })
  return {
    createMessage: (call) => {
      const adapter = adapters.get(call.endpoint.provider)
      return adapter === undefined ? Effect.fail(unknown(call)) : adapter.createMessage(call)
    },
    streamMessage: (call) => {
      const adapter = adapters.get(call.endpoint.provider)
      return adapter === undefined ? Effect.fail(unknown(call)) : adapter.streamMessage(call)
    }
  }
}

/** The Upstream port from provider configuration (or ready-made adapters, e.g. test doubles). */
export const layer = (providers: Readonly<Record<string, ProviderConfig | Upstream.UpstreamService>>) =>
  Layer.sync(Upstream.Upstream, () => make(providers))
