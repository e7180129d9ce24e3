/**
 * The statistics of one endpoint in a fixed amount of memory: time buckets kept in three rings,
 * each bucket holding outcome counts, and the one-minute buckets also log-scale histograms of time
 * to first byte and of output throughput. Percentiles and uptime are computed by adding up the
 * buckets of a window; two sets of windows (two gateway processes) are merged by adding buckets.
 * Pure: time is always passed in. `record`, `addBucket`, `mergeInto` and `clearFrom` mutate the
 * windows they are given (they run on every attempt); everything else leaves its input alone.
 *
 * | ring   | bucket | buckets | holds                           | answers                        |
 * |--------|--------|---------|---------------------------------|--------------------------------|
 * | fine   | 10 s   | 31      | outcome counts                  | recent outage (30 s), uptime 5 m |
 * | minute | 1 min  | 31      | counts, TTFB and throughput bins | percentiles 30 m, uptime 30 m  |
 * | hour   | 1 h    | 25      | outcome counts                  | uptime 1 d                     |
 *
 * About 18 KB per endpoint, whatever the traffic (`byteSize`).
 *
 * Definitions:
 * - Windows are widened to whole buckets: a window of length W at `now` holds the buckets that end
 *   after `now - W`, so it covers at least W and less than W plus one bucket. Buckets newer than
 *   `now` (clock skew between processes) count too.
 * - Uptime (percent) = ok / (ok + overloaded + error + timeout). Rate limits count neither way: a
 *   429 says our quota is spent, not that the endpoint is down (they act through `Retry-After` and
 *   the circuit breaker). No such attempt in the window: null.
 * - Recent outage: in the last 30 s (3 or 4 fine buckets), at least `OUTAGE_MIN_FAILURES` (3)
 *   overloaded/error/timeout outcomes and they are at least `OUTAGE_MIN_RATIO` (50%) of the
 *   outcomes that count for uptime.
 * - Latency is the time to first byte of every attempt that got one, whatever its outcome.
 *   Throughput is output tokens per second of generation, for `ok` attempts with output: tokens /
 *   (latency - TTFB), or tokens / latency when the TTFB is unknown or not below the latency (a
 *   non-streamed answer should be recorded with TTFB = latency).
 * - Percentiles are nearest-rank (the smallest value with at least p% of the samples at or below
 *   it), reported as the geometric middle of the histogram bin that holds it. Bins grow by a factor
 *   of 2^(1/3), so within the bins' range the reported value is within a factor 2^(1/6) of the exact
 *   percentile: at most `RELATIVE_ERROR` (12.25%) above it and 10.9% below. The range is 1 ms to
 *   ~43 min for TTFB and 1/16 to ~166,000 tokens/s for throughput; values outside it fall in the
 *   first or last bin.
 */
import type * as Duration from "effect/Duration"
import * as CircuitBreaker from "./CircuitBreaker.js"
import type { AttemptOutcome, AttemptRecord, EndpointHealth, Percentiles } from "./EndpointStats.js"

/** The outcomes, in the order of their counts in a bucket. */
export const outcomes: ReadonlyArray<AttemptOutcome> = ["ok", "rate_limited", "overloaded", "error", "timeout"]

const OK = 0
const RATE_LIMITED = 1
const OVERLOADED = 2
const ERROR = 3
const TIMEOUT = 4
const OUTCOMES = 5

const outcomeIndex: Record<AttemptOutcome, number> = {
  ok: OK,
  rate_limited: RATE_LIMITED,
  overloaded: OVERLOADED,
  error: ERROR,
  timeout: TIMEOUT
}

/** Bins per histogram. */
export const BINS = 64
/** Each bin's upper bound is this times its lower bound. */
export const BIN_RATIO = 2 ** (1 / 3)
/** Largest relative error of a reported percentile within the bins' range: 2^(1/6) - 1. */
export const RELATIVE_ERROR = 2 ** (1 / 6) - 1
/** Lower bound of the first TTFB bin (ms). */
export const TTFB_MIN_MS = 1
/** Lower bound of the first throughput bin (tokens per second). */
export const THROUGHPUT_MIN = 1 / 16

export const OUTAGE_WINDOW_MS = 30_000
export const OUTAGE_MIN_FAILURES = 3
export const OUTAGE_MIN_RATIO = 0.5

const MINUTE_MS = 60_000
const HOUR_MS = 60 * MINUTE_MS
const WINDOW_5M = 5 * MINUTE_MS
const WINDOW_30M = 30 * MINUTE_MS
const WINDOW_1D = 24 * HOUR_MS

/** A ring of buckets of one size. */
export interface Granularity {
  readonly bucketMs: number
  readonly slots: number
  readonly histograms: boolean
}

export const fine: Granularity = { bucketMs: 10_000, slots: WINDOW_5M / 10_000 + 1, histograms: false }
export const minute: Granularity = { bucketMs: MINUTE_MS, slots: WINDOW_30M / MINUTE_MS + 1, histograms: true }
export const hour: Granularity = { bucketMs: HOUR_MS, slots: WINDOW_1D / HOUR_MS + 1, histograms: false }
export const granularities: ReadonlyArray<Granularity> = [fine, minute, hour]

const TTFB_OFFSET = OUTCOMES
const THROUGHPUT_OFFSET = OUTCOMES + BINS

interface Ring {
  readonly granularity: Granularity
  readonly stride: number
  /** The bucket number (start / bucketMs) each slot holds; -Infinity when empty. */
  readonly stamps: Float64Array
  /** `stride` cells per slot: outcome counts, then TTFB bins and throughput bins (minute ring). */
  readonly cells: Uint32Array
}

/** The windows of one endpoint. */
export interface HealthWindows {
  readonly fine: Ring
  readonly minute: Ring
  readonly hour: Ring
}

const makeRing = (granularity: Granularity): Ring => {
  const stride = OUTCOMES + (granularity.histograms ? 2 * BINS : 0)
  const stamps = new Float64Array(granularity.slots)
  stamps.fill(-Infinity)
  return { granularity, stride, stamps, cells: new Uint32Array(granularity.slots * stride) }
}

const rings = (windows: HealthWindows): ReadonlyArray<Ring> => [windows.fine, windows.minute, windows.hour]

const ringOf = (windows: HealthWindows, bucketMs: number): Ring | undefined =>
  bucketMs === fine.bucketMs
    ? windows.fine
    : bucketMs === minute.bucketMs
    ? windows.minute
    : bucketMs === hour.bucketMs
    ? windows.hour
    : undefined

/** Windows with no attempts. */
export const empty = (): HealthWindows => ({ fine: makeRing(fine), minute: makeRing(minute), hour: makeRing(hour) })

/** Bytes held by the windows: the same for every windows, whatever was recorded. */
export const byteSize = (windows: HealthWindows): number =>
  rings(windows).reduce((sum, ring) => sum + ring.stamps.byteLength + ring.cells.byteLength, 0)

/** True when nothing is held. */
export const isEmpty = (windows: HealthWindows): boolean =>
  rings(windows).every((ring) => ring.stamps.every((stamp) => stamp === -Infinity))

/** The end (epoch ms) of the newest bucket held; -Infinity when empty. */
export const latest = (windows: HealthWindows): number =>
  Math.max(...rings(windows).map((ring) => (Math.max(...ring.stamps) + 1) * ring.granularity.bucketMs))

const slotOf = (ring: Ring, bucket: number): number => {
  const slots = ring.granularity.slots
  return ((bucket % slots) + slots) % slots
}

const resetSlot = (ring: Ring, slot: number, stamp: number) => {
  ring.stamps[slot] = stamp
  ring.cells.fill(0, slot * ring.stride, (slot + 1) * ring.stride)
}

// The offset of the cells of `bucket`, making room for it; -1 when the ring holds a newer bucket there.
const claim = (ring: Ring, bucket: number): number => {
  const slot = slotOf(ring, bucket)
  const stamp = ring.stamps[slot]
  if (stamp === bucket) return slot * ring.stride
  if (bucket < stamp) return -1
  resetSlot(ring, slot, bucket)
  return slot * ring.stride
}

/** The histogram bin of a value, given the lower bound of the first bin. */
export const binOf = (value: number, min: number): number => {
  if (!(value > min)) return 0
  const bin = Math.floor(Math.log2(value / min) * 3)
  return bin >= BINS ? BINS - 1 : bin
}

/** The value reported for a bin: its geometric middle. */
export const binValue = (bin: number, min: number): number => min * 2 ** ((bin + 0.5) / 3)

/** Output tokens per second of generation for an `ok` attempt with output, else null. */
export const throughputOf = (attempt: AttemptRecord): number | null => {
  if (attempt.outcome !== "ok" || !(attempt.outputTokens > 0)) return null
  const generationMs = attempt.ttfbMs !== null && attempt.latencyMs > attempt.ttfbMs
    ? attempt.latencyMs - attempt.ttfbMs
    : attempt.latencyMs
  return generationMs > 0 ? attempt.outputTokens / (generationMs / 1000) : null
}

/**
 * Adds an attempt to the windows (in place). An attempt older than what a ring still holds at its
 * slot is left out of that ring.
 */
export const record = (windows: HealthWindows, attempt: AttemptRecord): void => {
  if (!Number.isFinite(attempt.at)) return
  const outcome = outcomeIndex[attempt.outcome]
  if (outcome === undefined) return
  for (const ring of rings(windows)) {
    const base = claim(ring, Math.floor(attempt.at / ring.granularity.bucketMs))
    if (base < 0) continue
    ring.cells[base + outcome]++
    if (!ring.granularity.histograms) continue
    if (attempt.ttfbMs !== null && Number.isFinite(attempt.ttfbMs)) {
      ring.cells[base + TTFB_OFFSET + binOf(attempt.ttfbMs, TTFB_MIN_MS)]++
    }
    const throughput = throughputOf(attempt)
    if (throughput !== null && Number.isFinite(throughput)) {
      ring.cells[base + THROUGHPUT_OFFSET + binOf(throughput, THROUGHPUT_MIN)]++
    }
  }
}

const mergeRing = (target: Ring, source: Ring) => {
  for (let slot = 0; slot < source.granularity.slots; slot++) {
    const stamp = source.stamps[slot]
    if (stamp === -Infinity || stamp < target.stamps[slot]) continue
    const base = slot * source.stride
    if (stamp > target.stamps[slot]) resetSlot(target, slot, stamp)
    for (let i = 0; i < source.stride; i++) target.cells[base + i] += source.cells[base + i]
  }
}

/** Adds `source` into `target` (in place): equal buckets are summed, the newer bucket of a slot wins. */
export const mergeInto = (target: HealthWindows, source: HealthWindows): void => {
  mergeRing(target.fine, source.fine)
  mergeRing(target.minute, source.minute)
  mergeRing(target.hour, source.hour)
}

/** A copy of the windows. */
export const copy = (windows: HealthWindows): HealthWindows => {
  const out = empty()
  mergeInto(out, windows)
  return out
}

/** The sum of two windows (what two processes saw together); commutative and associative. */
export const merge = (a: HealthWindows, b: HealthWindows): HealthWindows => {
  const out = copy(a)
  mergeInto(out, b)
  return out
}

/** One bucket as plain data, for storing and exchanging. */
export interface Bucket {
  /** The bucket size: `fine`, `minute` or `hour`'s `bucketMs`. */
  readonly bucketMs: number
  /** Epoch ms, a multiple of `bucketMs`. */
  readonly start: number
  /** Counts in the order of `outcomes`. */
  readonly outcomes: ReadonlyArray<number>
  /** TTFB bin counts (`BINS` of them); one-minute buckets only. */
  readonly ttfb?: ReadonlyArray<number> | undefined
  /** Throughput bin counts (`BINS` of them); one-minute buckets only. */
  readonly throughput?: ReadonlyArray<number> | undefined
}

/** Every non-empty bucket held. */
export const buckets = (windows: HealthWindows): Array<Bucket> => {
  const out: Array<Bucket> = []
  for (const ring of rings(windows)) {
    const { bucketMs, histograms } = ring.granularity
    for (let slot = 0; slot < ring.granularity.slots; slot++) {
      const stamp = ring.stamps[slot]
      if (stamp === -Infinity) continue
      const base = slot * ring.stride
      const cells = ring.cells.subarray(base, base + ring.stride)
      if (cells.every((n) => n === 0)) continue
      out.push({
        bucketMs,
        start: stamp * bucketMs,
        outcomes: Array.from(cells.subarray(0, OUTCOMES)),
        ...(histograms
          ? {
            ttfb: Array.from(cells.subarray(TTFB_OFFSET, TTFB_OFFSET + BINS)),
            throughput: Array.from(cells.subarray(THROUGHPUT_OFFSET, THROUGHPUT_OFFSET + BINS))
          }
          : {})
      })
    }
  }
  return out
}

const addCounts = (cells: Uint32Array, offset: number, counts: ReadonlyArray<number> | undefined, length: number) => {
  if (counts === undefined) return
  const n = Math.min(length, counts.length)
  for (let i = 0; i < n; i++) {
    const count = counts[i]
    if (count > 0) cells[offset + i] += count
  }
}

/**
 * Adds a bucket into the windows (in place). A bucket of an unknown size, or older than what its
 * slot holds, is ignored; one newer than its slot replaces it.
 */
export const addBucket = (windows: HealthWindows, bucket: Bucket): void => {
  const ring = ringOf(windows, bucket.bucketMs)
  if (ring === undefined || !Number.isFinite(bucket.start)) return
  const base = claim(ring, Math.floor(bucket.start / bucket.bucketMs))
  if (base < 0) return
  addCounts(ring.cells, base, bucket.outcomes, OUTCOMES)
  if (!ring.granularity.histograms) return
  addCounts(ring.cells, base + TTFB_OFFSET, bucket.ttfb, BINS)
  addCounts(ring.cells, base + THROUGHPUT_OFFSET, bucket.throughput, BINS)
}

/** Empties (in place) the buckets of one size that start at or after `from` (epoch ms). */
export const clearFrom = (windows: HealthWindows, bucketMs: number, from: number): void => {
  const ring = ringOf(windows, bucketMs)
  if (ring === undefined) return
  const first = Math.floor(from / bucketMs)
  for (let slot = 0; slot < ring.granularity.slots; slot++) {
    if (ring.stamps[slot] >= first) resetSlot(ring, slot, -Infinity)
  }
}

// The first bucket number of a window of `windowMs` ending at `now`: buckets that end after now - windowMs.
const firstBucket = (ring: Ring, now: number, windowMs: number) =>
  Math.floor((now - windowMs) / ring.granularity.bucketMs)

const sumCounts = (ring: Ring, now: number, windowMs: number): Array<number> => {
  const counts = [0, 0, 0, 0, 0]
  const first = firstBucket(ring, now, windowMs)
  for (let slot = 0; slot < ring.granularity.slots; slot++) {
    if (ring.stamps[slot] < first) continue
    const base = slot * ring.stride
    for (let i = 0; i < OUTCOMES; i++) counts[i] += ring.cells[base + i]
  }
  return counts
}

const uptimeOf = (counts: ReadonlyArray<number>): number | null => {
  const total = counts[OK] + counts[OVERLOADED] + counts[ERROR] + counts[TIMEOUT]
  return total === 0 ? null : (100 * counts[OK]) / total
}

const percentiles = (bins: Float64Array, min: number): Percentiles | null => {
  let total = 0
  for (let i = 0; i < BINS; i++) total += bins[i]
  if (total === 0) return null
  const at = (p: number) => {
    const rank = Math.max(1, Math.ceil(p * total - 1e-9))
    let seen = 0
    for (let i = 0; i < BINS; i++) {
      seen += bins[i]
      if (seen >= rank) return binValue(i, min)
    }
    return binValue(BINS - 1, min)
  }
  return { p50: at(0.5), p75: at(0.75), p90: at(0.9), p99: at(0.99) }
}

/** The part of `EndpointHealth` that comes from the windows and is worth caching for a moment. */
export interface Statistics {
  readonly latency30m: Percentiles | null
  readonly throughput30m: Percentiles | null
  readonly uptime5m: number | null
  readonly uptime30m: number | null
  readonly uptime1d: number | null
}

/** Percentiles over 30 minutes and uptime over 5 minutes, 30 minutes and 1 day, at `now`. */
export const statistics = (windows: HealthWindows, now: number): Statistics => {
  const ring = windows.minute
  const first = firstBucket(ring, now, WINDOW_30M)
  const ttfb = new Float64Array(BINS)
  const throughput = new Float64Array(BINS)
  const counts = [0, 0, 0, 0, 0]
  for (let slot = 0; slot < ring.granularity.slots; slot++) {
    if (ring.stamps[slot] < first) continue
    const base = slot * ring.stride
    for (let i = 0; i < OUTCOMES; i++) counts[i] += ring.cells[base + i]
    for (let i = 0; i < BINS; i++) {
      ttfb[i] += ring.cells[base + TTFB_OFFSET + i]
      throughput[i] += ring.cells[base + THROUGHPUT_OFFSET + i]
    }
  }
  return {
    latency30m: percentiles(ttfb, TTFB_MIN_MS),
    throughput30m: percentiles(throughput, THROUGHPUT_MIN),
    uptime5m: uptimeOf(sumCounts(windows.fine, now, WINDOW_5M)),
    uptime30m: uptimeOf(counts),
    uptime1d: uptimeOf(sumCounts(windows.hour, now, WINDOW_1D))
  }
}

/** Significant failures in the last 30 s (see the module's definitions). */
export const recentOutage = (windows: HealthWindows, now: number): boolean => {
  const counts = sumCounts(windows.fine, now, OUTAGE_WINDOW_MS)
  const failures = counts[OVERLOADED] + counts[ERROR] + counts[TIMEOUT]
  return failures >= OUTAGE_MIN_FAILURES && failures >= OUTAGE_MIN_RATIO * (failures + counts[OK])
}

/** The health of an endpoint at `now`, from its windows and its circuit breaker. */
export const health = (
  windows: HealthWindows,
  now: number,
  breaker: CircuitBreaker.CircuitBreaker = CircuitBreaker.closed
): EndpointHealth => combine(statistics(windows, now), windows, now, breaker)

/** `health` with statistics computed earlier (at most a moment ago); the outage and breaker are fresh. */
export const combine = (
  stats: Statistics,
  windows: HealthWindows,
  now: number,
  breaker: CircuitBreaker.CircuitBreaker
): EndpointHealth => {
  const view = CircuitBreaker.view(breaker, now)
  // A literal rather than spreads: objects built by spread and then given new keys are slow on V8 11 (Node 20).
  return {
    latency30m: stats.latency30m,
    throughput30m: stats.throughput30m,
    uptime5m: stats.uptime5m,
    uptime30m: stats.uptime30m,
    uptime1d: stats.uptime1d,
    recentOutage: recentOutage(windows, now),
    coolingDownUntil: view.coolingDownUntil,
    halfOpen: view.halfOpen
  }
}

/** Options of an adapter that keeps the health windows in process (the memory and SQL adapters do). */
export interface WindowOptions {
  /** How long computed percentiles and uptime are reused (default 1 second; 0 computes on every read). */
  readonly healthCacheTtl?: Duration.DurationInput | undefined
  /** Most endpoints tracked; beyond, the one idle the longest is forgotten (default 10,000). */
  readonly healthMaxEndpoints?: number | undefined
  /** Circuit breaker settings (threshold, cooldowns, outcomes that count as failures). */
  readonly breaker?: Partial<CircuitBreaker.Options> | undefined
}

/** Memory held by such an adapter. */
export interface Footprint {
  readonly endpoints: number
  /** Bytes of the windows of every endpoint (with an adapter's pending deltas). */
  readonly windowBytes: number
}
