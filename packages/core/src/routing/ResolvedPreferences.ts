/**
 * The provider preferences as the route planner reads them, resolved once per plan (`resolve`): the provider lists
 * lower-cased (`only`, `ignore` and `quantizations` as sets), the defaults filled in (`allow_fallbacks` true, partition
 * `model`), `max_price` as numbers, and a bare number for `preferred_min_throughput` / `preferred_max_latency` taken
 * as a p50 cutoff.
 */
import type { Partition, PercentileCutoffs, ProviderPreferences, SortBy } from "./ProviderPreferences.js"

export interface Resolved {
  readonly order: ReadonlyArray<string> | undefined
  readonly only: ReadonlySet<string> | undefined
  readonly ignore: ReadonlySet<string>
  readonly allowFallbacks: boolean
  readonly requireParameters: boolean
  readonly denyDataCollection: boolean
  readonly zdr: boolean
  /** `enforce_distillable_text`: only endpoints of models marked distillable. */
  readonly enforceDistillableText: boolean
  readonly quantizations: ReadonlySet<string> | undefined
  readonly sortBy: SortBy | undefined
  readonly partition: Partition
  readonly maxPrice: {
    readonly prompt?: number
    readonly completion?: number
    readonly request?: number
    readonly image?: number
  }
  readonly minThroughput: PercentileCutoffs | undefined
  readonly maxLatency: PercentileCutoffs | undefined
}

const lower = (values: ReadonlyArray<string> | null | undefined): ReadonlyArray<string> | undefined =>
  values == null || values.length === 0 ? undefined : values.map((v) => v.toLowerCase())

const cutoffs = (value: number | PercentileCutoffs | null | undefined): PercentileCutoffs | undefined =>
  value == null ? undefined : typeof value === "number" ? { p50: value } : value

const amount = (value: number | string | null | undefined): number | undefined =>
  value == null ? undefined : Number(value)

export const resolve = (p: ProviderPreferences | null | undefined): Resolved => {
  const sort = p?.sort
  const only = lower(p?.only)
  const quantizations = lower(p?.quantizations)
  const max = p?.max_price
  const maxPrice: Record<string, number> = {}
  for (const key of ["prompt", "completion", "request", "image"] as const) {
    const n = amount(max?.[key])
    if (n !== undefined) maxPrice[key] = n
  }
  return {
    order: lower(p?.order),
    only: only && new Set(only),
    ignore: new Set(lower(p?.ignore)),
    allowFallbacks: p?.allow_fallbacks ?? true,
    requireParameters: p?.require_parameters ?? false,
    denyDataCollection: p?.data_collection === "deny",
    zdr: p?.zdr ?? false,
    enforceDistillableText: p?.enforce_distillable_text ?? false,
    quantizations: quantizations && new Set(quantizations),
    sortBy: sort == null ? undefined : typeof sort === "string" ? sort : sort.by ?? undefined,
    partition: sort == null || typeof sort === "string" ? "model" : sort.partition ?? "model",
    maxPrice,
    minThroughput: cutoffs(p?.preferred_min_throughput),
    maxLatency: cutoffs(p?.preferred_max_latency)
  }
}

/** No provider preferences: what `resolve` makes of an absent `provider`. */
export const NO_PREFERENCES = resolve(undefined)
