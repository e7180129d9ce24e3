/**
 * In-process `UsageLog` adapter: keeps the most recent records (10,000 by default) in a ring
 * buffer. Recording is a synchronous append, so it never waits on anything. A record takes about
 * 300 bytes of heap, so the default keeps about 3 MB; a process that needs its usage history
 * keeps it in SQL storage, which memory storage (lost at exit) never replaces.
 */
import { UsageLog } from "@model-gateway/core"
import { RingBuffer } from "@model-gateway/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

export interface MemoryUsageLogOptions {
  /** How many of the most recent records to keep (default 10,000). */
  readonly capacity?: number | undefined
}

const defaultCapacity = 10_000
const defaultLimit = 100

/** Builds an empty in-memory usage log. */
export const make = (options: MemoryUsageLogOptions = {}): Effect.Effect<UsageLog.UsageLogService> =>
  Effect.sync(() => {
    const records = new RingBuffer.RingBuffer<UsageLog.UsageRecord>(Math.max(1, options.capacity ?? defaultCapacity))
    return UsageLog.UsageLog.of({
      record: (record) =>
        Effect.sync(() => {
          records.push(record)
        }),
      flush: Effect.void,
      list: (query) =>
        Effect.sync(() => {
          const limit = Math.max(0, Math.floor(query.limit ?? defaultLimit))
          const out: Array<UsageLog.UsageRecord> = []
          for (let i = 0; i < records.size; i++) {
            const record = records.fromNewest(i)
            if (query.workspace === undefined || record.workspace === query.workspace) out.push(record)
          }
          // A stable sort: among records with the same time, the one recorded last comes first.
          return out.sort((a, b) => b.createdAt - a.createdAt).slice(0, limit)
        })
    })
  })

/** The in-memory `UsageLog` layer. */
export const layer = (options: MemoryUsageLogOptions = {}): Layer.Layer<UsageLog.UsageLog> =>
  Layer.effect(UsageLog.UsageLog, make(options))
