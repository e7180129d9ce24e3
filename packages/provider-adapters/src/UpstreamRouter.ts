/**
 * The Upstream port for a whole gateway: one adapter per configured provider, chosen by the
 * endpoint's `provider`. Adapters (and their connection pools) are built at start-up, and again for a provider whose
 * configuration a reload changes (`makeReplaceable`).
 */
import { Upstream } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as AnthropicUpstream from "./anthropic/AnthropicUpstream.js"
import * as Transport from "./internal/Transport.js"
import type { Timeouts } from "./internal/Transport.js"
import * as OpenAiUpstream from "./openai/OpenAiUpstream.js"
import * as LocalSpeech from "./speech/LocalSpeech.js"
import * as OpenAiSpeech from "./speech/OpenAiSpeech.js"

/** How to reach one provider. */
export type ProviderConfig = HttpProviderConfig | LocalSpeechConfig

/** A provider over HTTP. */
export interface HttpProviderConfig {
  readonly kind: "anthropic" | "openai"
  readonly baseUrl: string
  readonly apiKey?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly timeouts?: Partial<Timeouts> | undefined
  /** OpenAI-compatible providers: the output-cap field their endpoints take by default (see `OpenAiUpstream`). */
  readonly maxTokensField?: "max_tokens" | "max_completion_tokens" | undefined
  /**
   * OpenAI-compatible providers: keep Anthropic `cache_control` markers when translating `/v1/messages` (default: on
   * for openrouter.ai, off elsewhere; see `OpenAiUpstream`).
   */
  readonly cacheControl?: boolean | undefined
  /**
   * OpenAI-compatible providers: hand an assistant turn's thinking back as `reasoning_content` when translating
   * `/v1/messages` (default: on for api.deepseek.com and Moonshot's APIs, off elsewhere; see `OpenAiUpstream`).
   */
  readonly reasoningContent?: boolean | undefined
}

/** The local, offline speech engine (eSpeak NG in worker threads); see `LocalSpeech`. */
export interface LocalSpeechConfig {
  readonly kind: "local-speech"
  readonly workers?: number | undefined
  readonly maxInputChars?: number | undefined
  /** `firstByteMs`: how long a request may wait for its first audio, queueing included. */
  readonly timeouts?: { readonly firstByteMs?: number | undefined } | undefined
}

/** Builds the adapter for one provider, its connection pool closing with the scope. Add a provider kind here. */
export const adapterFor = (config: ProviderConfig): Effect.Effect<Upstream.UpstreamService, never, Scope.Scope> => {
  switch (config.kind) {
    case "anthropic":
      return AnthropicUpstream.make(config)
    case "openai":
      // OpenAI-compatible providers also serve `POST {baseUrl}/audio/speech`.
      return Effect.zipWith(OpenAiUpstream.make(config), OpenAiSpeech.make(config), (upstream, speech) => ({
        ...upstream,
        speech
      }))
    case "local-speech":
      return LocalSpeech.make({
        workers: config.workers,
        maxInputChars: config.maxInputChars,
        firstByteMs: config.timeouts?.firstByteMs
      })
  }
}

/**
 * The APIs the adapter of `config` can serve at all, whatever the request, when it cannot serve every one; undefined
 * when it may serve any. A catalogue gives them to the provider's endpoints (`Endpoint.apis`), so that the route
 * planner refuses a request no endpoint of its model can serve as any other it cannot route (the live routes and a
 * batch's submission alike), rather than the adapter at the first attempt.
 */
export const apisOf = (config: ProviderConfig): ReadonlyArray<string> | undefined =>
  config.kind === "anthropic" ? AnthropicUpstream.apis : undefined

/** Routes each call to its endpoint's provider adapter. The adapters' pools close with the scope. */
export const make = (
  providers: Readonly<Record<string, ProviderConfig | Upstream.UpstreamService>>
): Effect.Effect<Upstream.UpstreamService, never, Scope.Scope> =>
  Effect.map(makeReplaceable(providers), (router) => router.upstream)

/** The router, and a way to change its providers while it serves (a configuration reload). */
export interface Replaceable {
  readonly upstream: Upstream.UpstreamService
  /**
   * Builds adapters for these providers and puts them in place of those of the same names (or beside them): calls
   * that start afterwards go to the new ones. Calls under way finish on the old ones, which are then gone: an old
   * HTTP adapter's idle connections close at once, those in use once their call is over (`Transport.retire`). A local
   * speech engine replaced stops its workers at once, and its requests in progress with them.
   */
  readonly replace: (providers: Readonly<Record<string, ProviderConfig>>) => Effect.Effect<void>
}

/** One provider's adapter, and the scope it was built in. */
interface Built {
  readonly name: string
  readonly adapter: Upstream.UpstreamService
  /** Undefined for an adapter given ready-made: not the router's to close. */
  readonly own: Scope.CloseableScope | undefined
}

/** `make`, with `replace`. */
export const makeReplaceable = (
  providers: Readonly<Record<string, ProviderConfig | Upstream.UpstreamService>>
): Effect.Effect<Replaceable, never, Scope.Scope> =>
  Effect.flatMap(Effect.scope, (scope) => {
    /** Each built adapter's own scope, inside the router's: closed when the adapter is replaced, or with the router. */
    const scopes = new Map<string, Scope.CloseableScope>()
    const build = (
      name: string,
      config: ProviderConfig
    ): Effect.Effect<Built & { readonly own: Scope.CloseableScope }> =>
      Effect.flatMap(
        Scope.fork(scope, ExecutionStrategy.sequential),
        (own) => Effect.map(Scope.extend(adapterFor(config), own), (adapter) => ({ name, adapter, own }))
      )
    return Effect.map(
      Effect.forEach(
        Object.entries(providers),
        ([name, config]): Effect.Effect<Built> =>
          "kind" in config ? build(name, config) : Effect.succeed({ name, adapter: config, own: undefined })
      ),
      (built): Replaceable => {
        const adapters = new Map<string, Upstream.UpstreamService>()
        for (const { adapter, name, own } of built) {
          adapters.set(name, adapter)
          if (own !== undefined) scopes.set(name, own)
        }
        return {
          upstream: route(adapters),
          replace: (next) =>
            Effect.forEach(
              Object.entries(next),
              ([name, config]) =>
                Effect.flatMap(build(name, config), ({ adapter, own }) => {
                  const old = scopes.get(name)
                  adapters.set(name, adapter)
                  scopes.set(name, own)
                  return old === undefined ? Effect.void : Transport.retire(old)
                }),
              { discard: true }
            )
        }
      }
    )
  })

const route = (adapters: ReadonlyMap<string, Upstream.UpstreamService>): Upstream.UpstreamService => {
  const cannot = (call: Upstream.OpenAiCall) =>
    new Upstream.UpstreamError({
      kind: "unsupported",
      message: `provider '${call.endpoint.provider}' cannot serve the OpenAI ${call.api} API`
    })
  const unknown = (call: { readonly endpoint: { readonly provider: string } }) =>
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
    },
    createOpenAi: (call) => {
      const adapter = adapters.get(call.endpoint.provider)
      if (adapter === undefined) return Effect.fail(unknown(call))
      return adapter.createOpenAi === undefined ? Effect.fail(cannot(call)) : adapter.createOpenAi(call)
    },
    streamOpenAi: (call) => {
      const adapter = adapters.get(call.endpoint.provider)
      if (adapter === undefined) return Effect.fail(unknown(call))
      return adapter.streamOpenAi === undefined ? Effect.fail(cannot(call)) : adapter.streamOpenAi(call)
    },
    countTokens: (call) => {
      const adapter = adapters.get(call.endpoint.provider)
      if (adapter === undefined) return Effect.fail(unknown(call))
      return adapter.countTokens === undefined
        ? Effect.fail(
          new Upstream.UpstreamError({
            kind: "unsupported",
            message: `provider '${call.endpoint.provider}' cannot count tokens`
          })
        )
        : adapter.countTokens(call)
    },
    speech: (call) => {
      const adapter = adapters.get(call.endpoint.provider)
      if (adapter === undefined) return Effect.fail(unknown(call))
      return adapter.speech === undefined
        ? Effect.fail(
          new Upstream.UpstreamError({
            kind: "unsupported",
            message: `provider '${call.endpoint.provider}' does not synthesize speech`
          })
        )
        : adapter.speech(call)
    }
  }
}

/** The Upstream port from provider configuration (or ready-made adapters, e.g. test doubles). */
export const layer = (providers: Readonly<Record<string, ProviderConfig | Upstream.UpstreamService>>) =>
  Layer.scoped(Upstream.Upstream, make(providers))
