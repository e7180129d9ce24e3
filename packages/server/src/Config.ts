/**
 * The gateway's configuration file: decoded with Schema, `${VAR}` / `${VAR:-default}` expanded from
 * the environment first. A bad value stops start-up with a message naming the key; an unknown key
 * is a warning, so an older gateway accepts a newer file.
 */
import type { Catalogue } from "@model-gateway/core"
import { Cost, Limits } from "@model-gateway/core"
import type { UpstreamRouter } from "@model-gateway/provider-adapters"
import * as Data from "effect/Data"
import type * as Effect from "effect/Effect"
import * as Either from "effect/Either"
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
  idleMs: Schema.optional(PositiveInt)
})

const HttpProviderConfig = Schema.Struct({
  kind: Schema.Literal("anthropic", "openai"),
  baseUrl: Schema.String.pipe(
    Schema.filter((s) => /^https?:\/\/[^\s]+$/.test(s), { message: () => "must be an http(s) URL" })
  ),
  apiKey: Schema.optional(Schema.String),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  timeouts: Schema.optional(Timeouts),
  maxTokensField: Schema.optional(MaxTokensField)
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
 * the processes that use it; on a SQLite storage, its file), `redis` (`redisUrl`, shared). By default: Redis when a URL is given, else the storage's
 * PostgreSQL, else memory.
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

/** A configuration that cannot be used: the message names the key (or the file) and what is wrong. */
export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly message: string }> {}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** Expands `${VAR}` and `${VAR:-default}` in every string of a parsed JSON value. */
export const expandEnv = (value: unknown, env: Readonly<Record<string, string | undefined>>): unknown => {
  if (typeof value === "string") {
    return value.replace(VAR, (_, name: string, fallback: string | undefined) => {
      const v = env[name]
      return v === undefined || (v === "" && fallback !== undefined) ? (fallback ?? "") : v
    })
  }
  if (Array.isArray(value)) return value.map((v) => expandEnv(v, env))
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expandEnv(v, env)]))
  }
  return value
}

const pathOf = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((p, i) => (typeof p === "number" ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join("") ||
  "(root)"

const EXPECTED_LITERAL = /^Expected ("(?:[^"\\]|\\.)*"(?: \| "(?:[^"\\]|\\.)*")*), actual (.*)$/s

/**
 * The first bad key and what is wrong with it, in one line. A value outside an enumeration lists every allowed value
 * (Schema reports one issue per member of a union of literals).
 */
const firstProblem = (error: ParseResult.ParseError): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  const path = pathOf(first.path)
  // An optional key's union also reports "Expected undefined": not an allowed value worth listing.
  const here = issues.filter((issue) => pathOf(issue.path) === path && !issue.message.startsWith("Expected undefined,"))
  const literals = here.map((issue) => EXPECTED_LITERAL.exec(issue.message))
  if (literals.every((m) => m !== null)) {
    const allowed = [...new Set(literals.flatMap((m) => m![1].split(" | ")))]
    return `configuration key ${path}: must be one of ${allowed.join(", ")} (got ${literals[0]![2]})`
  }
  return `configuration key ${path}: ${first.message}`
}

export interface Loaded {
  readonly config: GatewayConfig
  readonly warnings: ReadonlyArray<string>
}

const strict = Schema.decodeUnknownEither(GatewayConfig, { errors: "all", onExcessProperty: "error" })
const lenient = Schema.decodeUnknownEither(GatewayConfig, { errors: "all", onExcessProperty: "ignore" })

/** Decodes and checks a parsed configuration object. Throws ConfigError naming the bad key. */
export const decode = (raw: unknown, env: Readonly<Record<string, string | undefined>> = {}): Loaded => {
  const expanded = expandEnv(raw, env)
  const warnings: Array<string> = []
  const first = strict(expanded)
  let result = first
  if (Either.isLeft(first)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(first.left)
    for (const issue of issues) {
      if (issue._tag === "Unexpected") warnings.push(`unknown configuration key ${pathOf(issue.path)} (ignored)`)
    }
    result = lenient(expanded)
  }
  if (Either.isLeft(result)) throw new ConfigError({ message: firstProblem(result.left) })
  const config = result.right
  for (const [modelId, model] of Object.entries(config.models)) {
    model.endpoints.forEach((endpoint, i) => {
      if (config.providers[endpoint.provider] === undefined) {
        throw new ConfigError({
          message:
            `configuration key models.${modelId}.endpoints[${i}].provider: unknown provider '${endpoint.provider}'${
              Object.keys(config.providers).length === 0
                ? " (no providers are configured)"
                : ` (configured: ${Object.keys(config.providers).join(", ")})`
            }`
        })
      }
    })
  }
  for (const [modelId, model] of Object.entries(config.models)) {
    const speaks = model.outputModalities?.includes("audio") ?? false
    model.endpoints.forEach((endpoint, i) => {
      const kind = config.providers[endpoint.provider].kind
      if (speaks && kind === "anthropic") {
        warnings.push(`models.${modelId}.endpoints[${i}]: provider '${endpoint.provider}' (anthropic) has no speech`)
      } else if (!speaks && kind === "local-speech") {
        warnings.push(
          `models.${modelId}.endpoints[${i}]: provider '${endpoint.provider}' only synthesizes speech; ` +
            `give the model "outputModalities": ["audio"]`
        )
      }
    })
  }
  const defaultModel = config.interns?.defaultModel
  if (defaultModel !== undefined && config.models[defaultModel] === undefined) {
    throw new ConfigError({ message: `configuration key interns.defaultModel: unknown model '${defaultModel}'` })
  }
  const keys = config.keys.filter((k, i) => {
    if (k.key.trim() !== "") return true
    warnings.push(`keys[${i}].key is empty (is its environment variable set?); that key is skipped`)
    return false
  })
  const seen = new Map<string, number>()
  config.keys.forEach((k, i) => {
    const first = seen.get(k.key)
    if (first !== undefined && k.key.trim() !== "") {
      throw new ConfigError({ message: `configuration key keys[${i}].key: the same key as keys[${first}]` })
    }
    seen.set(k.key, i)
  })
  return { config: { ...config, keys }, warnings }
}

/** Parses configuration file text. */
export const parse = (text: string, env: Readonly<Record<string, string | undefined>> = {}): Loaded => {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (e) {
    throw new ConfigError({ message: `configuration file is not valid JSON: ${(e as Error).message}` })
  }
  return decode(raw, env)
}

/** Configured limits as core's (USD as nano-USD); undefined when they limit nothing. */
export const limitsOf = (limits: LimitsConfig | undefined): Limits.Limits | undefined => {
  if (limits === undefined) return undefined
  const budget = limits.budget
  const usd = budget === undefined ? undefined : typeof budget.usd === "number" ? budget.usd.toFixed(9) : budget.usd
  const core: Limits.Limits = {
    requestsPerMinute: limits.requestsPerMinute,
    inputTokensPerMinute: limits.inputTokensPerMinute,
    outputTokensPerMinute: limits.outputTokensPerMinute,
    budget: budget === undefined ? undefined : { nanoUsd: Limits.nanoUsdOf(usd!)!, period: budget.period }
  }
  return Limits.isUnlimited(core) ? undefined : core
}

/** Where the limits' counters are kept, for a storage URL: see `LimitsStoreConfig`. */
export const limitsStoreOf = (config: GatewayConfig, storage: string): "memory" | "postgres" | "redis" =>
  config.limits.store ??
    (config.limits.redisUrl !== undefined
      ? "redis"
      : /^postgres(ql)?:\/\//.test(storage.trim())
      ? "postgres"
      : "memory")

/** The catalogue models the configuration describes. */
export const catalogueModels = (config: GatewayConfig): Array<Catalogue.Model> =>
  Object.entries(config.models).map(([id, model]) => {
    const seen = new Map<string, number>()
    return {
      id,
      name: model.name ?? id,
      maxTokensPolicy: model.maxTokensPolicy ?? config.maxTokensPolicy,
      scores: model.scores,
      outputModalities: model.outputModalities,
      voices: model.voices,
      endpoints: model.endpoints.map((e): Catalogue.Endpoint => {
        const n = (seen.get(e.provider) ?? 0) + 1
        seen.set(e.provider, n)
        return {
          id: n === 1 ? `${id}@${e.provider}` : `${id}@${e.provider}#${n}`,
          modelId: id,
          provider: e.provider,
          upstreamModel: e.upstreamModel,
          pricing: e.pricing,
          contextLength: e.contextLength,
          maxCompletionTokens: e.maxCompletionTokens,
          maxTokensField: e.maxTokensField,
          apis: e.apis,
          quantization: e.quantization,
          supportedParameters: e.supportedParameters,
          inputModalities: e.inputModalities,
          zdr: e.zdr,
          dataCollection: e.dataCollection ?? (e.zdr ? "deny" : "allow"),
          supportsVoiceCloning: e.supportsVoiceCloning,
          supportsMultipleAudioReferences: e.supportsMultipleAudioReferences,
          supportsImageReference: e.supportsImageReference
        }
      })
    }
  })

/** The provider adapters' configuration. */
export const providerConfigs = (config: GatewayConfig): Record<string, UpstreamRouter.ProviderConfig> =>
  Object.fromEntries(Object.entries(config.providers).map(([name, p]) => [name, p]))
