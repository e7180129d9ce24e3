/**
 * The gateway's configuration file: decoded with Schema (`ConfigSchema`), `${VAR}` / `${VAR:-default}` expanded from
 * the environment first. A bad value stops start-up with a message naming the key; an unknown key
 * is a warning, so an older gateway accepts a newer file.
 */
import type { Catalogue } from "@model-gateway/core"
import { Limits } from "@model-gateway/core"
import { UpstreamRouter } from "@model-gateway/provider-adapters"
import * as Data from "effect/Data"
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { GatewayConfig, type LimitsConfig } from "./ConfigSchema.js"

export { GatewayConfig, type LimitsConfig } from "./ConfigSchema.js"

/** A configuration that cannot be used: the message names the key (or the file) and what is wrong. */
export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly message: string }> {}

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/**
 * Expands `${VAR}` and `${VAR:-default}` in every string of a parsed JSON value. A `${VAR}` without a default whose
 * variable is unset expands to "" and is added to `unset`, with the key it is in.
 */
export const expandEnv = (
  value: unknown,
  env: Readonly<Record<string, string | undefined>>,
  unset: Array<{ readonly path: ReadonlyArray<PropertyKey>; readonly name: string }> = [],
  path: ReadonlyArray<PropertyKey> = []
): unknown => {
  if (typeof value === "string") {
    return value.replace(VAR, (_, name: string, fallback: string | undefined) => {
      const v = env[name]
      if (v === undefined && fallback === undefined) unset.push({ path, name })
      return v === undefined || (v === "" && fallback !== undefined) ? (fallback ?? "") : v
    })
  }
  if (Array.isArray(value)) return value.map((v, i) => expandEnv(v, env, unset, [...path, i]))
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expandEnv(v, env, unset, [...path, k])]))
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
const firstProblem = (error: ParseResult.ParseError, raw: unknown): string => {
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const first = issues[0]
  const path = pathOf(first.path)
  // An optional key's union also reports "Expected undefined": not an allowed value worth listing.
  const here = issues.filter((issue) => pathOf(issue.path) === path && !issue.message.startsWith("Expected undefined,"))
  const literals = here.map((issue) => EXPECTED_LITERAL.exec(issue.message))
  const problem = literals.every((m) => m !== null)
    ? `must be one of ${[...new Set(literals.flatMap((m) => m![1].split(" | ")))].join(", ")} (got ${literals[0]![2]})`
    : readable(first.message)
  return `configuration key ${path}: ${redacted(problem, raw, first.path)}`
}

/**
 * Keys whose values are secrets or may hold one: the gateway's keys, a provider's `apiKey` and `headers`, a storage or
 * Redis URL (its password). Matched on any segment of a key's path; a model whose name matches only hides more.
 */
const SENSITIVE = /key|secret|token|password|authorization|headers|url$|^storage$/i

/** The strings within `value`, however it is shaped (a secret may sit anywhere in a value of the wrong type). */
const stringsOf = (value: unknown, out: Array<string> = []): Array<string> => {
  if (typeof value === "string") out.push(value)
  else if (value !== null && typeof value === "object") { for (const v of Object.values(value)) stringsOf(v, out) }
  return out
}

/**
 * `message` without the text of the value at `path` when that value may be a secret: a key written where an object is
 * expected ("actual \"sk-...\"") would otherwise be printed at start, and written to the log by a refused reload.
 */
const redacted = (message: string, raw: unknown, path: ReadonlyArray<PropertyKey>): string => {
  if (!path.some((p) => typeof p === "string" && SENSITIVE.test(p))) return message
  let value: unknown = raw
  for (const p of path) value = value !== null && typeof value === "object" ? (value as any)[p] : undefined
  let out = message
  for (const text of stringsOf(value)) {
    if (text === "") continue
    out = out.split(text).join("<redacted>").split(JSON.stringify(text).slice(1, -1)).join("<redacted>")
  }
  return out
}

/** Schema's text for an object or array type (`{ readonly [x: string]: { ... } }`): a whole type, often hundreds of characters. */
const EXPECTED_TYPE = /^Expected (\{|ReadonlyArray<)[^]*, actual ([^]*)$/

/** An issue's message, with a structure's whole type said as what it is: an object, an array. */
const readable = (message: string): string => {
  const match = EXPECTED_TYPE.exec(message)
  return match === null ? message : `Expected ${match[1] === "{" ? "an object" : "an array"}, actual ${match[2]}`
}

export interface Loaded {
  readonly config: GatewayConfig
  readonly warnings: ReadonlyArray<string>
}

const strict = Schema.decodeUnknownEither(GatewayConfig, { errors: "all", onExcessProperty: "error" })
const lenient = Schema.decodeUnknownEither(GatewayConfig, { errors: "all", onExcessProperty: "ignore" })

/** Decodes and checks a parsed configuration object. Throws ConfigError naming the bad key. */
export const decode = (raw: unknown, env: Readonly<Record<string, string | undefined>> = {}): Loaded => {
  const unset: Array<{ readonly path: ReadonlyArray<PropertyKey>; readonly name: string }> = []
  const expanded = expandEnv(raw, env, unset)
  // An unset variable is the likeliest mistake of a newcomer (a provider's key not exported): said at start, not
  // found out from an upstream's 401. An empty key of `keys` is said below, with what becomes of it.
  const warnings: Array<string> = unset.filter(({ path }) => path[0] !== "keys").map(({ name, path }) =>
    `configuration key ${pathOf(path)}: environment variable ${name} is not set (it expands to "")`
  )
  const first = strict(expanded)
  let result = first
  if (Either.isLeft(first)) {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(first.left)
    for (const issue of issues) {
      if (issue._tag === "Unexpected") warnings.push(`unknown configuration key ${pathOf(issue.path)} (ignored)`)
    }
    result = lenient(expanded)
  }
  if (Either.isLeft(result)) throw new ConfigError({ message: firstProblem(result.left, expanded) })
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

/**
 * The catalogue models the configuration describes. An endpoint without `apis` of its own gets those its provider's
 * adapter is limited to (an Anthropic-protocol provider: messages and chat), so that route planning knows them. Each
 * model's `created` (the model list's) is when the gateway started offering it: `now` (unix seconds), or, for a model
 * the `offered` catalogue has already (a reload), when that one was.
 */
export const catalogueModels = (
  config: GatewayConfig,
  now: number = Math.floor(Date.now() / 1000),
  offered?: Catalogue.CatalogueSnapshot
): Array<Catalogue.Model> =>
  Object.entries(config.models).map(([id, model]) => {
    const seen = new Map<string, number>()
    return {
      id,
      name: model.name ?? id,
      created: offered?.models.get(id)?.created ?? now,
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
          apis: e.apis ?? providerApis(config, e.provider),
          quantization: e.quantization,
          supportedParameters: e.supportedParameters,
          inputModalities: e.inputModalities,
          zdr: e.zdr,
          dataCollection: e.dataCollection ?? (e.zdr ? "deny" : "allow"),
          distillable: model.distillable,
          supportsVoiceCloning: e.supportsVoiceCloning,
          supportsMultipleAudioReferences: e.supportsMultipleAudioReferences,
          supportsImageReference: e.supportsImageReference
        }
      })
    }
  })

/** The APIs the adapter of a configured provider is limited to (`UpstreamRouter.apisOf`); undefined: any. */
const providerApis = (config: GatewayConfig, name: string): ReadonlyArray<string> | undefined => {
  const provider = config.providers[name]
  return provider === undefined ? undefined : UpstreamRouter.apisOf(provider)
}

/** The provider adapters' configuration. */
export const providerConfigs = (config: GatewayConfig): Record<string, UpstreamRouter.ProviderConfig> =>
  Object.fromEntries(Object.entries(config.providers).map(([name, p]) => [name, p]))
