/**
 * The configuration file's schema: every key, its type, its bounds and its default. `Config` decodes a file with it.
 */
import { Cost, Limits } from "@model-gateway/core"
import type * as Effect from "effect/Effect"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"

const DecimalString = Schema.String.pipe(
  Schema.filter((s) => Cost.isDecimal(s), {
    message: () => "must be a non-negative decimal string such as \"0.000003\""
  })
)
const PositiveInt = Schema.Int.pipe(Schema.positive())
const MaxTokensField = Schema.Literal("max_tokens", "max_completion_tokens")

const Pricing = Schema.Struct({
  prompt: DecimalString,
  completion: DecimalString,
  request: Schema.optionalWith(DecimalString, { default: () => "0" }),
  image: Schema.optionalWith(DecimalString, { default: () => "0" }),
  inputCacheRead: Schema.optional(DecimalString),
  inputCacheWrite: Schema.optional(DecimalString)
})

const EndpointConfig = Schema.Struct({
  provider: Schema.String,
  upstreamModel: Schema.String.pipe(Schema.minLength(1)),
  pricing: Pricing,
  contextLength: Schema.optional(PositiveInt),
  maxCompletionTokens: Schema.optional(PositiveInt),
  maxTokensField: Schema.optional(MaxTokensField),
  apis: Schema.optional(Schema.Array(Schema.Literal("messages", "chat", "embeddings", "responses"))),
  quantization: Schema.optional(Schema.String),
  supportedParameters: Schema.optional(Schema.Array(Schema.String)),
  inputModalities: Schema.optional(Schema.Array(Schema.String)),
  zdr: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  dataCollection: Schema.optional(Schema.Literal("allow", "deny")),
  supportsVoiceCloning: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  supportsMultipleAudioReferences: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  supportsImageReference: Schema.optionalWith(Schema.Boolean, { default: () => false })
})

const Score = Schema.Number.pipe(Schema.between(0, 1))

const MaxTokensPolicy = Schema.Literal("clamp", "strict")

const ModelConfig = Schema.Struct({
  name: Schema.optional(Schema.String),
  /** What the model outputs: `audio` makes it a speech model (`POST /v1/audio/speech`); `text` by default. */
  outputModalities: Schema.optional(Schema.Array(Schema.String)),
  /** A speech model's voices (listed by the model endpoints). */
  voices: Schema.optional(Schema.Array(Schema.String)),
  maxTokensPolicy: Schema.optional(MaxTokensPolicy),
  /**
   * Whether the model's author allows distillation of its outputs (`provider.enforce_distillable_text`); false unless
   * the operator says so, since the gateway knows nothing of a model's licence.
   */
  distillable: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  endpoints: Schema.Array(EndpointConfig),
  scores: Schema.optional(Schema.Struct({
    code: Schema.optional(Score),
    math: Schema.optional(Score),
    writing: Schema.optional(Score),
    analysis: Schema.optional(Score),
    chat: Schema.optional(Score)
  }))
})

const ModerationConfig = Schema.Union(
  Schema.Struct({ kind: Schema.Literal("blocklist"), terms: Schema.Array(Schema.String.pipe(Schema.minLength(1))) }),
  Schema.Struct({
    kind: Schema.Literal("openai"),
    baseUrl: Schema.String,
    apiKey: Schema.optional(Schema.String),
    model: Schema.optional(Schema.String)
  })
)

const Panel = Schema.Array(Schema.String).pipe(Schema.minItems(1), Schema.maxItems(8))

const FusionConfig = Schema.Struct({
  panel: Schema.optional(Panel),
  presets: Schema.optional(Schema.Struct({
    "general-high": Schema.optional(Panel),
    "general-budget": Schema.optional(Panel),
    "general-fast": Schema.optional(Panel)
  }))
})

const Timeouts = Schema.Struct({
  connectMs: Schema.optional(PositiveInt),
  requestMs: Schema.optional(PositiveInt),
  firstByteMs: Schema.optional(PositiveInt),
  idleMs: Schema.optional(PositiveInt),
  firstContentMs: Schema.optional(PositiveInt)
})

const HttpProviderConfig = Schema.Struct({
  kind: Schema.Literal("anthropic", "openai"),
  baseUrl: Schema.String.pipe(
    Schema.filter((s) => /^https?:\/\/[^\s]+$/.test(s), { message: () => "must be an http(s) URL" })
  ),
  apiKey: Schema.optional(Schema.String),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  timeouts: Schema.optional(Timeouts),
  maxTokensField: Schema.optional(MaxTokensField),
  /** `openai` providers: keep Anthropic `cache_control` markers when translating (default: on for openrouter.ai). */
  cacheControl: Schema.optional(Schema.Boolean),
  /** `openai` providers: hand thinking back as `reasoning_content` (default: on for DeepSeek's and Moonshot's APIs). */
  reasoningContent: Schema.optional(Schema.Boolean)
})

/** The local, offline speech engine: no URL, no key. */
const LocalSpeechProviderConfig = Schema.Struct({
  kind: Schema.Literal("local-speech"),
  /** Worker threads (default 2). */
  workers: Schema.optional(PositiveInt.pipe(Schema.lessThanOrEqualTo(64))),
  /** The longest input in characters (default 20000). */
  maxInputChars: Schema.optional(PositiveInt),
  timeouts: Schema.optional(Schema.Struct({ firstByteMs: Schema.optional(PositiveInt) }))
})

const ProviderKind = Schema.Literal("anthropic", "openai", "local-speech")

type ProviderType = typeof HttpProviderConfig.Type | typeof LocalSpeechProviderConfig.Type
type ProviderEncoded = typeof HttpProviderConfig.Encoded | typeof LocalSpeechProviderConfig.Encoded

const isProviderKind = Schema.is(ProviderKind)
const decodeHttp = ParseResult.decodeUnknown(HttpProviderConfig)
const decodeLocal = ParseResult.decodeUnknown(LocalSpeechProviderConfig)
const encodeHttp = ParseResult.encodeUnknown(HttpProviderConfig)
const encodeLocal = ParseResult.encodeUnknown(LocalSpeechProviderConfig)

/** A provider, by its `kind` (so that an error is that kind's own, not every kind's). */
const ProviderConfig: Schema.Schema<ProviderType, ProviderEncoded> = Schema.declare([], {
  decode: () => (input, options): Effect.Effect<ProviderType, ParseResult.ParseIssue> => {
    const kind = Predicate.isRecord(input) ? input.kind : undefined
    if (kind !== undefined && !isProviderKind(kind)) {
      return ParseResult.fail(new ParseResult.Pointer("kind", input, new ParseResult.Type(ProviderKind.ast, kind)))
    }
    return kind === "local-speech" ? decodeLocal(input, options) : decodeHttp(input, options)
  },
  encode: () => (input, options): Effect.Effect<ProviderEncoded, ParseResult.ParseIssue> =>
    Predicate.isRecord(input) && input.kind === "local-speech"
      ? encodeLocal(input, options)
      : encodeHttp(input, options)
}, { description: "a provider" }) as any

/** USD as a decimal string or a JSON number, at most nano-USD precise. */
const Usd = Schema.Union(
  DecimalString,
  Schema.Number.pipe(Schema.nonNegative(), Schema.finite())
).pipe(
  Schema.filter((usd) => Limits.nanoUsdOf(typeof usd === "number" ? usd.toFixed(9) : usd) !== undefined, {
    message: () => "must be an amount of USD such as 25 or \"0.50\""
  })
)

/** The limits of a key or a workspace: per minute, a sliding window; the budget per UTC day, week or month. */
const LimitsConfig = Schema.Struct({
  requestsPerMinute: Schema.optional(PositiveInt),
  inputTokensPerMinute: Schema.optional(PositiveInt),
  outputTokensPerMinute: Schema.optional(PositiveInt),
  budget: Schema.optional(Schema.Struct({
    usd: Usd,
    period: Schema.optionalWith(Schema.Literal("day", "week", "month"), { default: () => "month" as const })
  }))
})
export type LimitsConfig = typeof LimitsConfig.Type

const KeyConfig = Schema.Struct({
  key: Schema.String,
  workspace: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "default" }),
  management: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  interns: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  label: Schema.optional(Schema.String),
  limits: Schema.optional(LimitsConfig)
})

/**
 * Where the limits' counters are kept: `memory` (this process only), `postgres` (the storage's database, shared by
 * the processes that use it; on a SQLite storage, its file; refused on `memory:` storage), `redis` (`redisUrl`,
 * shared). By default: Redis when a URL is given, else the storage's PostgreSQL, else memory.
 */
const LimitsStoreConfig = Schema.Struct({
  store: Schema.optional(Schema.Literal("memory", "postgres", "redis")),
  redisUrl: Schema.optional(Schema.String.pipe(
    Schema.filter((s) => /^rediss?:\/\/\S+$/.test(s), { message: () => "must be a redis:// or rediss:// URL" })
  )),
  /** The prefix of the Redis keys (default `mg:`), so that several gateways can share one Redis. */
  redisPrefix: Schema.optional(Schema.String)
})

/** An origin as browsers send it (`https://app.example.com`, `http://localhost:3000`: no path), or `*` for any. */
const Origin = Schema.String.pipe(
  Schema.filter((origin) =>
    origin === "*" || /^https?:\/\/[^/\s?#]+$/i.test(origin) ||
    "must be an origin such as https://app.example.com (scheme, host and port, no path), or *"
  )
)

/** Cross-origin requests from browsers: off unless origins are listed. */
const CorsConfig = Schema.Struct({
  allowedOrigins: Schema.Array(Origin),
  maxAgeSeconds: Schema.optionalWith(PositiveInt, { default: () => 600 })
})

const ServerConfig = Schema.Struct({
  host: Schema.optionalWith(Schema.String, { default: () => "127.0.0.1" }),
  port: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 65535)), { default: () => 8080 }),
  basePath: Schema.optionalWith(
    Schema.String.pipe(Schema.pattern(/^\/[\w./-]*$/, { message: () => "must start with /" })),
    { default: () => "/v1" }
  ),
  maxBodyBytes: Schema.optionalWith(PositiveInt, { default: () => 32 * 1024 * 1024 }),
  /** How long a client may take to send a request's headers (slow-loris, a connection that never sends). */
  headersTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 15_000 }),
  /** How long a request body may stop arriving before the request is answered 408 and its connection closed. */
  bodyIdleTimeoutMs: Schema.optionalWith(PositiveInt, { default: () => 10_000 }),
  /** Browser clients: `{allowedOrigins: [...]}`; off by default. */
  cors: Schema.optional(CorsConfig)
})

/**
 * Interns: where their daemons are reached, the hostnames that refuse intern routes, the model of an intern created
 * without one, each chat turn's `max_tokens`, and how long a revealed daemon token lasts.
 */
const InternsConfig = Schema.Struct({
  /**
   * The daemons' public origin: `{intern}` becomes the intern id and `{port}` its daemon's loopback port
   * (`https://{intern}.interns.example.com` behind a TLS proxy). Default: the loopback address, `http://127.0.0.1:{port}`.
   */
  publicOrigin: Schema.optional(
    Schema.String.pipe(
      Schema.filter((s) => /^https?:\/\/[^\s/]+$/.test(s), { message: () => "must be an http(s) origin" })
    )
  ),
  regionalHostnames: Schema.optionalWith(Schema.Array(Schema.String.pipe(Schema.minLength(1))), { default: () => [] }),
  defaultModel: Schema.optional(Schema.String.pipe(Schema.minLength(1))),
  maxTokens: Schema.optional(PositiveInt),
  tokenTtlSeconds: Schema.optionalWith(Schema.Int.pipe(Schema.between(10, 3600)), { default: () => 300 })
})

/**
 * Batches: their limits (more requests or a larger body is a 413), the price factor of their requests, what the
 * completion window `24h` lasts, and how this process's worker runs them.
 */
const BatchesConfig = Schema.Struct({
  maxRequests: Schema.optionalWith(PositiveInt, { default: () => 5_000 }),
  maxBodyBytes: Schema.optionalWith(PositiveInt, { default: () => 200 * 1024 * 1024 }),
  /** Multiplies the cost of every batch request ("0.5": half price); the endpoints' prices when absent. */
  priceFactor: Schema.optional(DecimalString),
  /** How long the completion window `24h` lasts, in seconds (a day; shorter to test expiry). */
  completionWindowSeconds: Schema.optionalWith(PositiveInt, { default: () => 86_400 }),
  /** Most requests of one batch running at once in this process. */
  perBatchConcurrency: Schema.optionalWith(PositiveInt, { default: () => 16 }),
  /** Most batch requests running at once in this process. */
  perProcessConcurrency: Schema.optionalWith(PositiveInt, { default: () => 64 }),
  /** How long a worker's claim on a batch or a request lasts unless renewed (a dead process's, then taken over). */
  leaseMs: Schema.optionalWith(Schema.Int.pipe(Schema.greaterThanOrEqualTo(100)), { default: () => 30_000 }),
  /** How often an idle worker looks for work. */
  pollMs: Schema.optionalWith(PositiveInt, { default: () => 1_000 }),
  /** Tries after the first, for a request that failed in a way that may pass (429, 5xx, time-outs). */
  maxRetries: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 20)), { default: () => 3 }),
  /** The first back-off before a retry, doubling (with jitter) up to a minute. */
  retryBaseMs: Schema.optionalWith(PositiveInt, { default: () => 1_000 }),
  /** Run batches in this process (every process does by default). */
  worker: Schema.optionalWith(Schema.Boolean, { default: () => true })
})

/** The configuration file. */
export const GatewayConfig = Schema.Struct({
  server: Schema.optionalWith(ServerConfig, { default: () => ServerConfig.make({}) }),
  storage: Schema.optionalWith(Schema.String, { default: () => "sqlite:./data/gateway.db" }),
  providers: Schema.optionalWith(Schema.Record({ key: Schema.String, value: ProviderConfig }), { default: () => ({}) }),
  models: Schema.optionalWith(Schema.Record({ key: Schema.String, value: ModelConfig }), { default: () => ({}) }),
  keys: Schema.optionalWith(Schema.Array(KeyConfig), { default: () => [] }),
  /** Per workspace: its limits, shared by all its keys (each key may have its own too). */
  workspaces: Schema.optionalWith(
    Schema.Record({ key: Schema.String, value: Schema.Struct({ limits: Schema.optional(LimitsConfig) }) }),
    { default: () => ({}) }
  ),
  limits: Schema.optionalWith(LimitsStoreConfig, { default: () => ({}) }),
  autoRouter: Schema.optionalWith(Schema.Struct({ slug: Schema.String.pipe(Schema.minLength(1)) }), {
    default: () => ({ slug: "auto" })
  }),
  /**
   * A request whose `max_tokens` no endpoint of a model can honour: `clamp` sends it with the endpoint's own limit,
   * `strict` refuses it (400). Per model too.
   */
  maxTokensPolicy: Schema.optionalWith(MaxTokensPolicy, { default: () => "clamp" as const }),
  moderation: Schema.optional(ModerationConfig),
  fusion: Schema.optional(FusionConfig),
  interns: Schema.optional(InternsConfig),
  batches: Schema.optionalWith(BatchesConfig, { default: () => BatchesConfig.make({}) })
})
export type GatewayConfig = typeof GatewayConfig.Type
