import { Option } from "effect"
import { describe, expect, it } from "vitest"
import { decode, limitsOf, limitsStoreOf } from "../src/Config.js"
import * as KeysCommand from "../src/KeysCommand.js"

describe("limits in the configuration", () => {
  it("reads a key's and a workspace's limits, USD as a number or a decimal string, in nano-USD", () => {
    const { config } = decode({
      keys: [{ key: "k", limits: { requestsPerMinute: 10, budget: { usd: 2.5, period: "week" } } }],
      workspaces: { team: { limits: { outputTokensPerMinute: 1000, budget: { usd: "0.000000001" } } } }
    })
    expect(limitsOf(config.keys[0].limits)).toEqual({
      requestsPerMinute: 10,
      inputTokensPerMinute: undefined,
      outputTokensPerMinute: undefined,
      budget: { nanoUsd: 2_500_000_000, period: "week" }
    })
    // The budget's period is a month unless given.
    expect(limitsOf(config.workspaces.team.limits)?.budget).toEqual({ nanoUsd: 1, period: "month" })
    expect(limitsOf(undefined)).toBeUndefined()
    expect(limitsOf({})).toBeUndefined()
  })

  it("a bad limit stops the start, naming its key", () => {
    expect(() => decode({ keys: [{ key: "k", limits: { requestsPerMinute: 0 } }] })).toThrow(
      /configuration key keys\[0\]\.limits\.requestsPerMinute/
    )
    expect(() => decode({ keys: [{ key: "k", limits: { budget: { usd: 1, period: "year" } } }] })).toThrow(
      /keys\[0\]\.limits\.budget\.period: must be one of "day", "week", "month"/
    )
    expect(() => decode({ workspaces: { w: { limits: { budget: { usd: "-1" } } } } })).toThrow(
      /workspaces\.w\.limits\.budget\.usd/
    )
    expect(() => decode({ limits: { redisUrl: "http://x" } })).toThrow(/limits\.redisUrl: must be a redis/)
  })

  it("keeps the counters in Redis when a URL is given, else in the storage's PostgreSQL, else in memory", () => {
    const of = (raw: unknown, storage: string) => limitsStoreOf(decode(raw).config, storage)
    expect(of({}, "sqlite:./data/gateway.db")).toBe("memory")
    expect(of({}, "memory:")).toBe("memory")
    expect(of({}, "postgres://u@h:5432/db")).toBe("postgres")
    expect(of({ limits: { redisUrl: "redis://127.0.0.1:6379" } }, "postgres://u@h:5432/db")).toBe("redis")
    expect(of({ limits: { store: "memory", redisUrl: "redis://127.0.0.1:6379" } }, "postgres://h/db")).toBe("memory")
  })
})

describe("keys create's limit flags", () => {
  const base = { workspace: "w", management: false, interns: false, label: Option.none() }

  it("make the key's limits, and say them in a few words", () => {
    const limits = KeysCommand.limitsOf({
      ...base,
      requestsPerMinute: Option.some(60),
      outputTokensPerMinute: Option.some(40_000),
      budgetUsd: Option.some("25"),
      budgetPeriod: Option.some("day")
    })
    expect(limits).toEqual({
      requestsPerMinute: 60,
      inputTokensPerMinute: undefined,
      outputTokensPerMinute: 40_000,
      budget: { nanoUsd: 25_000_000_000, period: "day" }
    })
    expect(KeysCommand.describeLimits(limits)).toBe("60 req/min, 40000 out/min, $25/day")
    expect(KeysCommand.limitsOf(base)).toBeUndefined()
  })

  it("refuse a limit that is not a whole number above 0, and a budget that is not an amount", () => {
    expect(() => KeysCommand.limitsOf({ ...base, requestsPerMinute: Option.some(0) })).toThrow(
      /--requests-per-minute must be a whole number above 0/
    )
    expect(() => KeysCommand.limitsOf({ ...base, budgetUsd: Option.some("ten") })).toThrow(/--budget-usd must be/)
  })

  it("refuse a budget period without a budget (it made an unlimited key), and name the flag of a wrong period", () => {
    expect(() => KeysCommand.limitsOf({ ...base, budgetPeriod: Option.some("day") })).toThrow(
      "--budget-period needs --budget-usd"
    )
    expect(() => KeysCommand.limitsOf({ ...base, budgetUsd: Option.some("5"), budgetPeriod: Option.some("year") }))
      .toThrow("--budget-period must be one of day, week, month (got year)")
    expect(KeysCommand.limitsOf({ ...base, budgetUsd: Option.some("5"), budgetPeriod: Option.none() })?.budget)
      .toEqual({ nanoUsd: 5_000_000_000, period: "month" })
  })
})
