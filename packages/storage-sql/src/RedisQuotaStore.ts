/**
 * `QuotaStore` over Redis (ioredis): one hash per scope (`<prefix>q:<scope>`), fields `t<slot>` (the second of a
 * bucket), `r<slot>`, `i<slot>`, `o<slot>` (requests, input and output tokens in it), `p` (the budget period) and `c`
 * (nano-USD spent in it). Each operation that changes them is one Lua script, so it is atomic across every gateway
 * process that shares the Redis: the scripts run the same rules as core's `QuotaCounters` (the contract suite checks
 * both); `status`, which changes nothing, reads the hashes and counts them with `QuotaCounters` itself. Times come
 * from the gateway's clock, so the processes' clocks should agree (NTP); amounts travel as integer strings, and are
 * added with HINCRBY, so no spending is ever rounded. `ioredis` is loaded when the layer is built, not before.
 */
import { GatewayError, Limits, QuotaCounters, QuotaStore } from "@model-gateway/core"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type { Redis } from "ioredis"

/** Redis could not be reached or refused the scripts. */
export class RedisQuotaStoreError extends Data.TaggedError("RedisQuotaStoreError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

export interface RedisQuotaStoreOptions {
  /** `redis://[user:password@]host:port[/db]` (or `rediss://`). */
  readonly url: string | Redacted.Redacted<string>
  /** Prefix of every key (default `mg:`): several gateways (or test runs) can share one Redis. */
  readonly prefix?: string | undefined
  /** How long one script may take before the request is refused as unavailable (default 5 s). */
  readonly commandTimeoutMs?: number | undefined
}

const WINDOW = QuotaCounters.WINDOW_SECONDS

// Shared by both scripts: the scope's hash read into a table.
const RESERVE = `
local W = ${WINDOW}
local now = tonumber(ARGV[1])
local sec = math.floor(now / 1000)
local names = { 'r', 'i', 'o' }
local demand = { tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]) }
local cost = tonumber(ARGV[5])
local scopes = {}
for k = 1, #KEYS do
  local base = 6 + (k - 1) * 6
  local flat = redis.call('HGETALL', KEYS[k])
  local h = {}
  for j = 1, #flat, 2 do h[flat[j]] = flat[j + 1] end
  local s = {
    limits = { tonumber(ARGV[base]), tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]) },
    budget = tonumber(ARGV[base + 3]), period = ARGV[base + 4], ends = tonumber(ARGV[base + 5]),
    used = { 0, 0, 0 }, newest = { 0, 0, 0 }, buckets = { {}, {}, {} }, spent = 0, h = h
  }
  for j = 0, W - 1 do
    local t = tonumber(h['t' .. j] or '0')
    if t > 0 and t > sec - W then
      for m = 1, 3 do
        local a = tonumber(h[names[m] .. j] or '0')
        if a ~= 0 then
          s.used[m] = s.used[m] + a
          table.insert(s.buckets[m], { t, a })
          if t > s.newest[m] then s.newest[m] = t end
        end
      end
    end
  end
  if s.period ~= '' and h['p'] == s.period then s.spent = tonumber(h['c'] or '0') end
  scopes[k] = s
end
local function waitFor(s, m, limit, amount)
  local sum = s.used[m]
  if sum + amount <= limit then return 0 end
  local b = s.buckets[m]
  table.sort(b, function(x, y) return x[1] < y[1] end)
  local freed = 0
  for _, e in ipairs(b) do
    freed = freed + e[2]
    if sum - freed + amount <= limit then return math.max(1, (e[1] + W) * 1000 - now) end
  end
  return W * 1000
end
local rscope, rkind, rmetric, rwait = 0, 0, 0, 0
for k = 1, #KEYS do
  local s = scopes[k]
  local kind, metric, wait = 0, 0, 0
  if s.budget >= 0 and s.spent + cost > s.budget then
    kind = 2
  else
    for m = 1, 3 do
      local limit = s.limits[m]
      if limit >= 0 and demand[m] ~= 0 then
        local w = waitFor(s, m, limit, demand[m])
        if w > 0 and (kind == 0 or w > wait) then kind, metric, wait = 1, m, w end
      end
    end
  end
  if kind == 2 then
    if rkind ~= 2 then rscope, rkind, rmetric, rwait = k, 2, 0, 0 end
  elseif kind == 1 then
    if rkind == 0 or (rkind == 1 and wait > rwait) then rscope, rkind, rmetric, rwait = k, 1, metric, wait end
  end
end
local out = { rscope, rkind, rmetric, rwait }
if rkind == 0 then
  local slot = sec % W
  for k = 1, #KEYS do
    local s = scopes[k]
    local key = KEYS[k]
    if tonumber(s.h['t' .. slot] or '0') ~= sec then
      redis.call('HSET', key, 't' .. slot, sec, 'r' .. slot, 0, 'i' .. slot, 0, 'o' .. slot, 0)
    end
    for m = 1, 3 do
      if demand[m] ~= 0 then
        redis.call('HINCRBY', key, names[m] .. slot, ARGV[1 + m])
        s.used[m] = s.used[m] + demand[m]
        s.newest[m] = sec
      end
    end
    local ttl = (W + 1) * 1000
    if s.budget >= 0 then
      if s.h['p'] ~= s.period then redis.call('HSET', key, 'p', s.period, 'c', 0) end
      s.spent = redis.call('HINCRBY', key, 'c', ARGV[5])
      ttl = math.max(ttl, s.ends - now + 60000)
    end
    redis.call('PEXPIRE', key, ttl)
  end
end
for k = 1, #KEYS do
  local s = scopes[k]
  for m = 1, 3 do
    table.insert(out, s.used[m])
    table.insert(out, s.newest[m])
  end
  table.insert(out, s.spent)
end
return out
`

const SETTLE = `
local W = ${WINDOW}
local names = { 'r', 'i', 'o' }
local now = tonumber(ARGV[1])
local sec = math.floor(now / 1000)
local rsec = math.floor(tonumber(ARGV[2]) / 1000)
local deltas = { ARGV[3], ARGV[4], ARGV[5] }
local excess = false
for m = 1, 3 do if tonumber(deltas[m]) > 0 then excess = true end end
for k = 1, #KEYS do
  local key = KEYS[k]
  local stamp = tonumber(redis.call('HGET', key, 't' .. (rsec % W)) or '0')
  local inWindow = stamp == rsec and rsec > sec - W
  if inWindow or excess then
    local target = sec
    if inWindow then target = rsec end
    local slot = target % W
    if not inWindow and tonumber(redis.call('HGET', key, 't' .. slot) or '0') ~= target then
      redis.call('HSET', key, 't' .. slot, target, 'r' .. slot, 0, 'i' .. slot, 0, 'o' .. slot, 0)
    end
    for m = 1, 3 do
      if inWindow or tonumber(deltas[m]) > 0 then
        if redis.call('HINCRBY', key, names[m] .. slot, deltas[m]) < 0 then
          redis.call('HSET', key, names[m] .. slot, 0)
        end
      end
    end
  end
  local period = ARGV[6 + k]
  if period ~= '' and tonumber(ARGV[6]) ~= 0 and redis.call('HGET', key, 'p') == period then
    if redis.call('HINCRBY', key, 'c', ARGV[6]) < 0 then redis.call('HSET', key, 'c', 0) end
  end
end
return 0
`

type ScriptedRedis = Redis & {
  quotaReserve(numberOfKeys: number, ...args: Array<string>): Promise<Array<number>>
  quotaSettle(numberOfKeys: number, ...args: Array<string>): Promise<number>
}

const int = (n: number): string => String(Math.trunc(n))

const orNone = (n: number | undefined): string => (n === undefined ? "-1" : int(n))

/** The status of one scope from what the reserve script read back: used and newest second per metric, spending. */
const statusOf = (
  limits: Limits.Limits,
  values: ReadonlyArray<number>,
  offset: number,
  now: number
): QuotaCounters.ScopeStatus => {
  const remaining = (limit: number | undefined, used: number, newest: number): QuotaCounters.Remaining | undefined =>
    limit === undefined ? undefined : {
      limit,
      remaining: Math.max(0, limit - used),
      resetsAt: newest === 0 ? now : (newest + WINDOW) * 1000
    }
  const budget = limits.budget
  return {
    requests: remaining(limits.requestsPerMinute, values[offset], values[offset + 1]),
    inputTokens: remaining(limits.inputTokensPerMinute, values[offset + 2], values[offset + 3]),
    outputTokens: remaining(limits.outputTokensPerMinute, values[offset + 4], values[offset + 5]),
    budget: budget === undefined ? undefined : {
      limit: budget.nanoUsd,
      remaining: Math.max(0, budget.nanoUsd - values[offset + 6]),
      resetsAt: Limits.periodOf(budget.period, now).endsAt
    }
  }
}

const METRICS: ReadonlyArray<QuotaCounters.Metric> = ["requests", "inputTokens", "outputTokens"]

/** A scope's hash (`HGETALL`; empty when it has none) as core's counters. */
const countersOf = (hash: Record<string, string>): QuotaCounters.Counters => {
  const slots = (name: string) => Array.from({ length: WINDOW }, (_, i) => Number(hash[`${name}${i}`] ?? 0))
  return {
    stamps: slots("t"),
    requests: slots("r"),
    inputTokens: slots("i"),
    outputTokens: slots("o"),
    period: hash.p ?? null,
    spent: Number(hash.c ?? 0)
  }
}

const unavailable = (cause: unknown) =>
  new GatewayError.Unavailable({
    message: `the limits store (Redis) cannot be reached: ${cause instanceof Error ? cause.message : cause}`
  })

/** Builds the store over a connected client. */
export const fromClient = (
  client: Redis,
  options: { readonly prefix?: string | undefined } = {}
): QuotaStore.QuotaStoreService => {
  const prefix = options.prefix ?? "mg:"
  client.defineCommand("quotaReserve", { lua: RESERVE })
  client.defineCommand("quotaSettle", { lua: SETTLE })
  const redis = client as ScriptedRedis
  const keyOf = (scope: string) => `${prefix}q:${scope}`

  const reserve = (request: QuotaStore.ReserveRequest) =>
    Effect.tryPromise({
      try: () => {
        const { amounts, now, scopes } = request
        const args: Array<string> = [
          ...scopes.map((s) => keyOf(s.scope)),
          int(now),
          int(amounts.requests),
          int(amounts.inputTokens),
          int(amounts.outputTokens),
          int(amounts.costNanoUsd)
        ]
        for (const { limits } of scopes) {
          const period = limits.budget === undefined ? undefined : Limits.periodOf(limits.budget.period, now)
          args.push(
            orNone(limits.requestsPerMinute),
            orNone(limits.inputTokensPerMinute),
            orNone(limits.outputTokensPerMinute),
            orNone(limits.budget?.nanoUsd),
            period?.id ?? "",
            int(period?.endsAt ?? 0)
          )
        }
        return redis.quotaReserve(scopes.length, ...args)
      },
      catch: unavailable
    }).pipe(Effect.map((values): QuotaStore.ReserveResult => {
      const { now, scopes } = request
      const status = scopes.map(({ limits }, k) => statusOf(limits, values, 4 + k * 7, now))
      const [refusedScope, kind, metric, wait] = values
      if (kind === 0) {
        return {
          _tag: "Reserved",
          reservation: {
            scopes: scopes.map(({ limits, scope }) => ({
              scope,
              period: limits.budget === undefined ? null : Limits.periodOf(limits.budget.period, now).id
            })),
            amounts: request.amounts,
            at: now
          },
          status
        }
      }
      const { limits, scope } = scopes[refusedScope - 1]
      const refusal: QuotaCounters.Refusal = kind === 2
        ? {
          _tag: "OverBudget",
          limitNanoUsd: limits.budget!.nanoUsd,
          spentNanoUsd: values[4 + (refusedScope - 1) * 7 + 6],
          resetsAt: Limits.periodOf(limits.budget!.period, now).endsAt
        }
        : {
          _tag: "RateLimited",
          metric: METRICS[metric - 1],
          limit: QuotaCounters.limitOf(limits, METRICS[metric - 1])!,
          retryAfterMs: wait
        }
      return { _tag: "Refused", scope, refusal, status }
    }))

  // A plain read of the scopes' hashes, counted by core's rules (the ones the reserve script mirrors).
  const status = (scopes: ReadonlyArray<QuotaStore.ScopeLimits>, now: number) =>
    Effect.tryPromise({
      try: () => Promise.all(scopes.map(({ scope }) => client.hgetall(keyOf(scope)))),
      catch: unavailable
    }).pipe(
      Effect.map((hashes) => scopes.map(({ limits }, k) => QuotaCounters.status(countersOf(hashes[k]), limits, now)))
    )

  const settle = (reservation: QuotaStore.Reservation, used: Limits.Amounts, now: number) => {
    const delta = Limits.minus(used, reservation.amounts)
    return Effect.tryPromise(() =>
      redis.quotaSettle(
        reservation.scopes.length,
        ...reservation.scopes.map((s) => keyOf(s.scope)),
        int(now),
        int(reservation.at),
        int(delta.requests),
        int(delta.inputTokens),
        int(delta.outputTokens),
        int(delta.costNanoUsd),
        ...reservation.scopes.map((s) => s.period ?? "")
      )
    ).pipe(
      Effect.asVoid,
      Effect.catchAll((error) => Effect.logWarning(`limits: a reservation could not be settled: ${error.message}`))
    )
  }

  return QuotaStore.QuotaStore.of({
    reserve,
    status,
    settle,
    release: (reservation, now) => settle(reservation, Limits.zero, now)
  })
}

/** Where a Redis URL points, without credentials. */
const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `Redis at ${parsed.hostname}:${parsed.port || "6379"}`
  } catch {
    return "Redis (an invalid URL)"
  }
}

/** The Redis quota store, connected when built (a failure names the server, never a password) and closed after. */
export const layer = (
  options: RedisQuotaStoreOptions
): Layer.Layer<QuotaStore.QuotaStore, RedisQuotaStoreError> => {
  const url = Redacted.isRedacted(options.url) ? Redacted.value(options.url) : options.url
  return Layer.scoped(
    QuotaStore.QuotaStore,
    Effect.map(
      Effect.acquireRelease(
        Effect.tryPromise({
          try: async () => {
            // Loaded only when Redis is configured: a gateway without it never pays for the module.
            const { Redis } = await import("ioredis")
            const client = new Redis(url, {
              lazyConnect: true,
              maxRetriesPerRequest: 1,
              commandTimeout: options.commandTimeoutMs ?? 5_000,
              connectTimeout: 5_000,
              retryStrategy: (times) => Math.min(times * 200, 2_000)
            })
            // ioredis reports connection errors as events too; they become failed commands, not crashes.
            client.on("error", () => {})
            try {
              await client.connect()
            } catch (cause) {
              client.disconnect()
              throw cause
            }
            return client
          },
          catch: (cause) =>
            new RedisQuotaStoreError({
              message: `cannot reach ${describeUrl(url)}: ${cause instanceof Error ? cause.message : String(cause)}`,
              cause
            })
        }),
        (client) => Effect.promise(() => client.quit().catch(() => client.disconnect()))
      ),
      (client) => fromClient(client, { prefix: options.prefix })
    )
  )
}
