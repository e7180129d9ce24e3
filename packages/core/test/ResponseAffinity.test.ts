/**
 * A Responses request that continues a stored response (`previous_response_id`): the key under which the gateway
 * remembers the endpoint that stored it, the plan that keeps to that endpoint's provider, the store read only when
 * the field is sent, and the ids the Responses dialect says were stored.
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Either, Option } from "effect"
import type { Endpoint, Model } from "../src/catalogue/Catalogue.js"
import { makeSnapshot } from "../src/catalogue/Catalogue.js"
import * as Routing from "../src/execution/Routing.js"
import * as OpenAiDialects from "../src/openai/OpenAiDialects.js"
import * as RoutePlanner from "../src/routing/RoutePlanner.js"
import * as SessionAffinity from "../src/sessions/SessionAffinity.js"
import { healthOf } from "./HealthFixtures.js"

const endpoint = (modelId: string, provider: string, prompt: number): Endpoint => ({
  id: `${modelId}@${provider}`,
  modelId,
  provider,
  upstreamModel: modelId.split("/")[1],
  pricing: { prompt: (prompt / 1e6).toFixed(12), completion: "0", request: "0", image: "0" },
  zdr: false,
  dataCollection: "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false
})

const model = (id: string, ...endpoints: Array<Endpoint>): Model => ({ id, name: id, endpoints })

// x/m on two providers, `cheap` first by price; y/n (a fallback) on `dear` only; z/one on `dear` alone.
const snapshot = makeSnapshot([
  model("x/m", endpoint("x/m", "cheap", 1), endpoint("x/m", "dear", 3)),
  model("y/n", endpoint("y/n", "dear", 2), endpoint("y/n", "cheap", 5)),
  model("z/one", endpoint("z/one", "dear", 1))
])

const none: RoutePlanner.Requirements = { tools: false, images: false, documents: false, api: "responses" }
const cheapest = () => 0

const planOf = (request: Partial<RoutePlanner.RouteRequest>, context: RoutePlanner.RouteContext = {}) =>
  Either.getOrThrow(
    RoutePlanner.plan({ model: "x/m", requirements: none, ...request }, snapshot, { random: cheapest, ...context })
  )

const ids = (request: Partial<RoutePlanner.RouteRequest>, context: RoutePlanner.RouteContext = {}) =>
  planOf(request, context).attempts.map((a) => a.endpoint.id)

const stored = (endpointId: string): RoutePlanner.StoredResponse => ({ id: "resp_1", endpointId })

describe("SessionAffinity.responseKey", () => {
  it("is `response:`, the workspace, a unit separator and the id", () => {
    expect(SessionAffinity.responseKey("team-a", "resp_abc")).toBe("response:team-a\u001fresp_abc")
  })

  it("differs per workspace, so that one tenant's id cannot name another's entry", () => {
    expect(SessionAffinity.responseKey("team-a", "resp_abc")).not.toBe(
      SessionAffinity.responseKey("team-b", "resp_abc")
    )
  })

  it("never equals a session key: one unit separator where a session key has two or more", () => {
    const key = SessionAffinity.responseKey("w", "resp_1")!
    expect(key.split("\u001f")).toHaveLength(2)
    expect(SessionAffinity.affinityKey("response:w", "resp_1", "x/m").split("\u001f").length).toBeGreaterThan(2)
    // The ids and workspaces that could make one are not keyed at all.
    expect(SessionAffinity.responseKey("w", "s\u001fx/m")).toBeUndefined()
    expect(SessionAffinity.responseKey("w\u001fs", "x/m")).toBeUndefined()
  })

  it("is undefined for an id longer than any provider's", () => {
    expect(SessionAffinity.responseKey("w", "r".repeat(SessionAffinity.MAX_RESPONSE_ID_LENGTH))).toBeDefined()
    expect(SessionAffinity.responseKey("w", "r".repeat(SessionAffinity.MAX_RESPONSE_ID_LENGTH + 1))).toBeUndefined()
  })
})

describe("planning with a stored response", () => {
  it("goes to the endpoint that stored it, and to no other provider's", () => {
    expect(ids({})).toEqual(["x/m@cheap", "x/m@dear"])
    const plan = planOf({}, { response: stored("x/m@dear") })
    expect(plan.attempts.map((a) => a.endpoint.id)).toEqual(["x/m@dear"])
    expect(plan.attempts[0].reason).toContain("stores the previous response")
    expect(plan.steps).toContainEqual({
      type: "routing",
      name: "response",
      summary: "not trying x/m via cheap: previous response resp_1 is stored at dear"
    })
  })

  it("wins over the session's endpoint", () => {
    const session = { key: "w\u001fs\u001fx/m", endpointId: "x/m@cheap" }
    expect(ids({}, { session })).toEqual(["x/m@cheap", "x/m@dear"])
    expect(ids({}, { session, response: stored("x/m@dear") })).toEqual(["x/m@dear"])
  })

  it("keeps the provider's endpoints of other models, after the one that stored it", () => {
    expect(ids({ fallbacks: [{ model: "y/n" }] }, { response: stored("x/m@dear") })).toEqual(["x/m@dear", "y/n@dear"])
    // Stored by a fallback model's endpoint: that one first.
    expect(ids({ fallbacks: [{ model: "y/n" }] }, { response: stored("y/n@dear") })).toEqual(["y/n@dear", "x/m@dear"])
  })

  it("applies whatever provider.order says: no other provider holds the response", () => {
    expect(ids({ provider: { order: ["cheap"] } }, { response: stored("x/m@dear") })).toEqual(["x/m@dear"])
  })

  it("still tries an endpoint that is not healthy, in its place among its provider's, never another provider's", () => {
    const cooling = healthOf({ "x/m@dear": { coolingDownUntil: 2_000 } })
    const plan = planOf({ fallbacks: [{ model: "y/n" }] }, {
      health: cooling,
      now: 1_000,
      response: stored("x/m@dear")
    })
    expect(plan.attempts.map((a) => a.endpoint.id)).toEqual(["y/n@dear", "x/m@dear"])
    expect(plan.steps.map((s) => s.summary)).toContain(
      "x/m via dear stores previous response resp_1; not moved first: it is not healthy"
    )
    const outage = healthOf({ "x/m@dear": { recentOutage: true } })
    expect(ids({}, { health: outage, response: stored("x/m@dear") })).toEqual(["x/m@dear"])
    expect(ids({ fallbacks: [{ model: "y/n" }] }, { health: outage, response: stored("x/m@dear") })).toEqual([
      "x/m@dear",
      "y/n@dear"
    ])
  })

  it("routes as without it when the endpoint that stored it cannot serve the request", () => {
    const plan = planOf({}, { response: stored("gone/model@elsewhere") })
    expect(plan.attempts.map((a) => a.endpoint.id)).toEqual(["x/m@cheap", "x/m@dear"])
    expect(plan.steps.map((s) => s.summary)).toContain(
      "previous response resp_1 is stored at endpoint gone/model@elsewhere, which is not eligible for this request: " +
        "routed as without it"
    )
    expect(ids({ provider: { only: ["cheap"] } }, { response: stored("x/m@dear") })).toEqual(["x/m@cheap"])
  })

  it("a model with one endpoint gets the same plan, and says why", () => {
    const plan = planOf({ model: "z/one" }, { response: stored("z/one@dear") })
    expect(plan.attempts.map((a) => a.endpoint.id)).toEqual(["z/one@dear"])
    expect(plan.attempts[0].reason).toContain("stores the previous response")
  })
})

/** A SessionAffinity whose reads are counted, with `entries` stored. */
const countingAffinity = (entries: Record<string, string>) => {
  const reads: Array<string> = []
  return {
    reads,
    service: {
      get: (key: string) => Effect.sync(() => (reads.push(key), Option.fromNullable(entries[key]))),
      set: () => Effect.void
    }
  }
}

const route = (
  entries: Record<string, string>,
  input: { readonly sessionId?: string; readonly previousResponseId?: string }
) => {
  const affinity = countingAffinity(entries)
  const stats = { record: () => Effect.void, snapshot: Effect.succeed(healthOf({})) }
  const planned = Effect.runSync(
    Effect.flatMap(Effect.clock, (clock: Clock.Clock) =>
      Routing.plan({ stats, affinity: affinity.service }, {
        request: { model: "x/m", requirements: none },
        workspace: "w",
        sessionId: input.sessionId,
        previousResponseId: input.previousResponseId,
        snapshot,
        clock
      }))
  )
  return { planned, reads: affinity.reads, ids: planned.attempts.map((a) => a.endpoint.id) }
}

describe("Routing.plan", () => {
  it("reads no store for a request without previous_response_id", () => {
    expect(route({}, {}).reads).toEqual([])
    expect(route({}, { sessionId: "s" }).reads).toEqual([SessionAffinity.affinityKey("w", "s", "x/m")])
    expect(route({}, {}).planned.responseKey).toBeUndefined()
  })

  it("reads the response's key, routes to its endpoint, and gives the key to refresh", () => {
    const key = SessionAffinity.responseKey("w", "resp_1")!
    const known = route({ [key]: "x/m@dear" }, { previousResponseId: "resp_1" })
    expect(known.reads).toEqual([key])
    expect(known.ids).toEqual(["x/m@dear"])
    expect(known.planned.responseKey).toBe(key)
    const both = route({ [key]: "x/m@dear" }, { previousResponseId: "resp_1", sessionId: "s" })
    expect(both.reads).toEqual([key, SessionAffinity.affinityKey("w", "s", "x/m")])
    expect(both.ids).toEqual(["x/m@dear"])
  })

  it("routes as without it when the id is unknown, or stored for another workspace", () => {
    const unknown = route({}, { previousResponseId: "resp_1" })
    expect(unknown.ids).toHaveLength(2)
    expect(unknown.planned.responseKey).toBeUndefined()
    const other = route({ [SessionAffinity.responseKey("other", "resp_1")!]: "x/m@dear" }, {
      previousResponseId: "resp_1"
    })
    expect(other.ids).toHaveLength(2)
  })
})

describe("the Responses dialect's stored ids", () => {
  const calls = { upstream: {} as never, api: "responses" as const, bodyFor: () => ({}), headers: {} }

  it("are the JSON answer's id and the stream's response id, unless store is false", () => {
    const dialect = OpenAiDialects.responses(calls)
    expect(dialect.storedAs?.({ id: "resp_1", object: "response" })).toBe("resp_1")
    expect(dialect.storedAs?.({ id: "resp_1", object: "response", store: false })).toBeUndefined()
    expect(dialect.frames.storedAs?.({ type: "response.created", response: { id: "resp_2" } })).toBe("resp_2")
    expect(dialect.frames.storedAs?.({ type: "response.output_text.delta", delta: "hi" })).toBeUndefined()
  })

  it("are none for a request sent with store: false", () => {
    const dialect = OpenAiDialects.responses(calls, false)
    expect(dialect.storedAs).toBeUndefined()
    expect(dialect.frames.storedAs).toBeUndefined()
  })

  it("are none for the chat and embeddings dialects", () => {
    expect(OpenAiDialects.chat({ ...calls, api: "chat" }, { includeUsage: false }).storedAs).toBeUndefined()
    expect(OpenAiDialects.embeddings({ ...calls, api: "embeddings" }).frames.storedAs).toBeUndefined()
  })
})
