/**
 * Every in-memory store in one layer: `Keys`, `UsageLog`, `EndpointStats` and `SessionAffinity`.
 */
import type { EndpointStats, Keys, SessionAffinity, UsageLog } from "@model-gateway/core"
import { Layer } from "effect"
import * as MemoryEndpointStats from "./MemoryEndpointStats.js"
import * as MemoryKeys from "./MemoryKeys.js"
import * as MemorySessionAffinity from "./MemorySessionAffinity.js"
import * as MemoryUsageLog from "./MemoryUsageLog.js"

export interface StorageMemoryOptions
  extends
    MemoryKeys.MemoryKeysOptions,
    MemoryUsageLog.MemoryUsageLogOptions,
    MemoryEndpointStats.MemoryEndpointStatsOptions,
    MemorySessionAffinity.MemorySessionAffinityOptions
{}

/** In-memory `Keys`, `UsageLog`, `EndpointStats` and `SessionAffinity`. */
export const layer = (
  options: StorageMemoryOptions = {}
): Layer.Layer<Keys.Keys | UsageLog.UsageLog | EndpointStats.EndpointStats | SessionAffinity.SessionAffinity> =>
  Layer.mergeAll(
    MemoryKeys.layer(options),
    MemoryUsageLog.layer(options),
    MemoryEndpointStats.layer(options),
    MemorySessionAffinity.layer(options)
  )
