/**
 * The gateway's configuration file: decoded with Schema, `${VAR}` / `${VAR:-default}` expanded from
 * the environment first. A bad value stops start-up with a message naming the key; an unknown key
 * is a warning, so an older gateway accepts a newer file.
 */
import type { Catalogue } from "@model-gateway/core"
import { Cost } from "@model-gateway/core"
import type { UpstreamRouter } from "@model-gateway/provider-adapters"
import { Either, ParseResult, Schema } from "effect"

const DecimalString = Schema.String.pipe(
  Schema.filter((s) => Cost.isDecimal(s), {
    message: () => "must be a non-negative decimal string such as \"0.000003\""
  })
)
const PositiveInt = Schema.Int.pipe(Schema.positive())

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

const ModelConfig = Schema.Struct({
  name: Schema.optional(Schema.String),
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

const ProviderConfig = Schema.Struct({
  kind: Schema.Literal("anthropic", "openai"),
  baseUrl: Schema.String.pipe(
    Schema.filter((s) => /^https?:\/\/[^\s]+$/.test(s), { message: () => "must be an http(s) URL" })
  ),
  apiKey: Schema.optional(Schema.String),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  timeouts: Schema.optional(Timeouts)
})

const KeyConfig = Schema.Struct({
  key: Schema.String,
  workspace: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { default: () => "default" }),
  management: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  interns: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  label: Schema.optional(Schema.String)
})

const ServerConfig = Schema.Struct({
  host: Schema.optionalWith(Schema.String, { default: () => "127.0.0.1" }),
  port: Schema.optionalWith(Schema.Int.pipe(Schema.between(0, 65535)), { default: () => 8080 }),
  basePath: Schema.optionalWith(
    Schema.String.pipe(Schema.pattern(/^\/[\w./-]*$/, { message: () => "must start with /" })),
    { default: () => "/v1" }
  ),
  maxBodyBytes: Schema.optionalWith(PositiveInt, { default: () => 32 * 1024 * 1024 })
})

/** The configuration file. */
export const GatewayConfig = Schema.Struct({
  server: Schema.optionalWith(ServerConfig, { default: () => ServerConfig.make({}) }),
  storage: Schema.optionalWith(Schema.String, { default: () => "sqlite:./data/gateway.db" }),
  providers: Schema.optionalWith(Schema.Record({ key: Schema.String, value: ProviderConfig }), { default: () => ({}) }),
  models: Schema.optionalWith(Schema.Record({ key: Schema.String, value: ModelConfig }), { default: () => ({}) }),
  keys: Schema.optionalWith(Schema.Array(KeyConfig), { default: () => [] }),
  autoRouter: Schema.optionalWith(Schema.Struct({ slug: Schema.String.pipe(Schema.minLength(1)) }), {
    default: () => ({ slug: "auto" })
  }),
  moderation: Schema.optional(ModerationConfig),
  fusion: Schema.optional(FusionConfig)
})
export type GatewayConfig = typeof GatewayConfig.Type

/** A configuration error: the message names the key. */
export class ConfigError extends Error {
  override readonly name = "ConfigError"
}

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
  if (Either.isLeft(result)) {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(result.left)[0]
    throw new ConfigError(`configuration key ${pathOf(issue.path)}: ${issue.message}`)
  }
  const config = result.right
  for (const [modelId, model] of Object.entries(config.models)) {
    model.endpoints.forEach((endpoint, i) => {
      if (config.providers[endpoint.provider] === undefined) {
        throw new ConfigError(
          `configuration key models.${modelId}.endpoints[${i}].provider: unknown provider '${endpoint.provider}'`
        )
      }
    })
  }
  const keys = config.keys.filter((k, i) => {
    if (k.key.trim() !== "") return true
    warnings.push(`keys[${i}].key is empty (is its environment variable set?); that key is skipped`)
    return false
  })
  return { config: { ...config, keys }, warnings }
}

/** Parses configuration file text. */
export const parse = (text: string, env: Readonly<Record<string, string | undefined>> = {}): Loaded => {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch (e) {
    throw new ConfigError(`configuration file is not valid JSON: ${(e as Error).message}`)
  }
  return decode(raw, env)
}

/** The catalogue models the configuration describes. */
export const catalogueModels = (config: GatewayConfig): Array<Catalogue.Model> =>
  Object.entries(config.models).map(([id, model]) => {
    const seen = new Map<string, number>()
    return {
      id,
      name: model.name ?? id,
      scores: model.scores,
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
