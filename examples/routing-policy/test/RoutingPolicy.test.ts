/**
 * Unit tests of a routing policy: plain data in, a plan out, run with `Effect.runSync`. No server, no network, no
 * Layers, no test runtime.
 */
import { describe, expect, it } from "@effect/vitest"
import type { RoutePlanner } from "@model-gateway/core"
import { Effect, Either } from "effect"
import { providersFor, route } from "../src/index.js"

/** Health where the given endpoints had significant failures in the last 30 seconds. */
const outage = (...endpointIds: Array<string>): RoutePlanner.HealthSnapshot => ({
  get: (id) =>
    endpointIds.includes(id) ?
      {
        latency30m: null,
        throughput30m: null,
        uptime5m: 40,
        uptime30m: 80,
        uptime1d: 99,
        recentOutage: true,
        coolingDownUntil: null,
        halfOpen: false
      } :
      undefined
})

const failure = (request: Parameters<typeof route>[0]) => Effect.runSync(Effect.flip(route(request)))

describe("EU-only ZDR policy", () => {
  it("plans only EU zero-data-retention endpoints, cheapest first", () => {
    expect(providersFor({ model: "mistral/large" })).toEqual(["scaleway", "mistral-eu"])
  })

  it("explains each choice in the pipeline steps", () => {
    const plan = Effect.runSync(route({ model: "mistral/large" }))
    expect(plan.attempts[0].reason).toBe("requested model mistral/large via scaleway: sorted by price, $7.2/M")
    expect(plan.steps.filter((s) => s.name === "filter").map((s) => s.summary)).toEqual([
      "mistral/large via nebius-eu removed by provider.zdr: is not a zero-data-retention endpoint",
      "mistral/large via us-cloud removed by provider.only: us-cloud is not in provider.only"
    ])
  })

  it("keeps a session on the endpoint that served it last while it is healthy", () => {
    const session = { key: "workspace\u0000session-1\u0000mistral/large", endpointId: "mistral/large@mistral-eu" }
    expect(providersFor({ model: "mistral/large", session })).toEqual(["mistral-eu", "scaleway"])
    const down = outage("mistral/large@mistral-eu")
    expect(providersFor({ model: "mistral/large", session, health: down })).toEqual(["scaleway", "mistral-eu"])
  })

  it("moves an endpoint with a recent outage to the end instead of dropping it", () => {
    expect(providersFor({ model: "mistral/large", health: outage("mistral/large@scaleway") })).toEqual([
      "mistral-eu",
      "scaleway"
    ])
  })

  it("skips an endpoint whose context is too small for the request", () => {
    expect(providersFor({ model: "mistral/large", estimatedPromptTokens: 30_000, maxTokens: 4096 })).toEqual([
      "mistral-eu"
    ])
  })

  it("answers 400 naming the filters when no EU ZDR endpoint serves the model, 404 for an unknown model", () => {
    const unavailable = failure({ model: "meta/llama-70b" })
    expect(unavailable._tag).toBe("InvalidRequest")
    expect(unavailable.message).toBe(
      "No endpoints found that can serve this request (provider.only): provider.only removed meta/llama-70b via " +
        "us-cloud (us-cloud is not in provider.only)"
    )
    expect(failure({ model: "nope/nothing" })._tag).toBe("NotFound")
  })

  it("is a pure function: the same request gives the same plan, as an Either too", () => {
    const request = { model: "mistral/large", session: { key: "s" } }
    const either = Effect.runSync(Effect.either(route(request)))
    expect(Either.isRight(either) && either.right).toEqual(Effect.runSync(route(request)))
  })
})
