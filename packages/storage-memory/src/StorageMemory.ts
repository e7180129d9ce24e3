/**
 * Both in-memory stores in one layer: `Keys` and `UsageLog`.
 */
import type { Keys, UsageLog } from "@model-gateway/core"
import { Layer } from "effect"
import * as MemoryKeys from "./MemoryKeys.js"
import * as MemoryUsageLog from "./MemoryUsageLog.js"

export interface StorageMemoryOptions extends MemoryKeys.MemoryKeysOptions, MemoryUsageLog.MemoryUsageLogOptions {}

/** In-memory `Keys` and `UsageLog`. */
export const layer = (options: StorageMemoryOptions = {}): Layer.Layer<Keys.Keys | UsageLog.UsageLog> =>
  Layer.merge(MemoryKeys.layer(options), MemoryUsageLog.layer(options))
