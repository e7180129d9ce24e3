/**
 * Every in-memory store in one layer: `Keys`, `UsageLog`, `EndpointStats`, `SessionAffinity`, `InternStore` and
 * `BatchStore` and `QuotaStore`.
 */
import type { Stores } from "@model-gateway/core"
import * as Layer from "effect/Layer"
import * as MemoryBatchStore from "./MemoryBatchStore.js"
import * as MemoryEndpointStats from "./MemoryEndpointStats.js"
import * as MemoryInternStore from "./MemoryInternStore.js"
import * as MemoryKeys from "./MemoryKeys.js"
import * as MemoryQuotaStore from "./MemoryQuotaStore.js"
import * as MemorySessionAffinity from "./MemorySessionAffinity.js"
import * as MemoryUsageLog from "./MemoryUsageLog.js"

export interface StorageMemoryOptions
  extends
    MemoryKeys.MemoryKeysOptions,
    MemoryUsageLog.MemoryUsageLogOptions,
    MemoryEndpointStats.MemoryEndpointStatsOptions,
    MemorySessionAffinity.MemorySessionAffinityOptions
{}

/** In-memory `Keys`, `UsageLog`, `EndpointStats`, `SessionAffinity`, `InternStore`, `BatchStore` and `QuotaStore`. */
export const layer = (
  options: StorageMemoryOptions = {}
): Layer.Layer<Stores.Stores> =>
  Layer.mergeAll(
    MemoryKeys.layer(options),
    MemoryUsageLog.layer(options),
    MemoryEndpointStats.layer(options),
    MemorySessionAffinity.layer(options),
    MemoryInternStore.layer,
    MemoryBatchStore.layer,
    MemoryQuotaStore.layer
  )
