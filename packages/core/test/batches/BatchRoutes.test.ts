import { assert, describe, it } from "@effect/vitest"
import { Either } from "effect"
import * as BatchItems from "../../src/batches/BatchItems.js"
import { makeSnapshot } from "../../src/catalogue/Catalogue.js"
import type { BatchRequests } from "../../src/index.js"
import * as RoutePlanner from "../../src/routing/RoutePlanner.js"
import { endpoint, model } from "../messages/Fakes.js"

const snapshot = makeSnapshot([
  model("anthro/claude", endpoint("anthro/claude", "anthro", { apis: ["messages", "chat"] })),
  model("acme/gpt", endpoint("acme/gpt", "acme", { contextLength: 1_000 })),
  { ...model("acme/voice", endpoint("acme/voice", "acme")), outputModalities: ["audio"] }
])

const say = { messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }

const submission = (
  endpoint: BatchRequests.Submission["endpoint"],
  modelId: string,
  bodies: ReadonlyArray<Record<string, unknown>>,
  provider: BatchRequests.Submission["provider"] = null
): BatchRequests.Submission => ({
  endpoint,
  model: modelId,
  provider,
  requests: bodies.map((body, i) => ({ custom_id: `c${i}`, body }))
})

/** The error of preparing a submission, as its tag and message. */
const refused = (s: BatchRequests.Submission) => {
  const result = BatchItems.prepare(s, "batch_1", snapshot)
  if (Either.isRight(result)) throw new Error("expected the submission to be refused")
  return { tag: result.left._tag, message: result.left.message }
}

/** What the live route's planner says of the same request. */
const live = (request: RoutePlanner.RouteRequest) => {
  const result = RoutePlanner.plan(request, snapshot)
  if (Either.isRight(result)) throw new Error("expected the plan to fail")
  return result.left.message
}

const none: RoutePlanner.Requirements = { tools: false, images: false, documents: false }

describe("BatchItems.prepare plans each request as its live route would", () => {
  it("refuses an API that no endpoint of the model serves, with the planner's message", () => {
    const error = refused(submission("/v1/embeddings", "anthro/claude", [{ input: "x" }]))
    assert.strictEqual(error.tag, "InvalidRequest")
    const planner = live({ model: "anthro/claude", requirements: { ...none, api: "embeddings" } })
    assert.strictEqual(error.message, `requests[0].body: ${planner} (custom_id "c0")`)
  })

  it("refuses a model that does not answer in text, on every text API", () => {
    for (const endpoint of ["/v1/chat/completions", "/v1/messages", "/v1/responses"] as const) {
      const body = endpoint === "/v1/responses" ? { input: "x" } : say
      const error = refused(submission(endpoint, "acme/voice", [body]))
      assert.match(error.message, /^requests\[0\]\.body\.model: Model 'acme\/voice' does not answer in text/)
      assert.match(error.message, /\(custom_id "c0"\)$/)
    }
  })

  it("refuses the first request whose own provider preferences leave no endpoint, naming it", () => {
    const error = refused(submission("/v1/chat/completions", "acme/gpt", [say, { ...say, provider: { only: ["x"] } }]))
    assert.match(
      error.message,
      /^requests\[1\]\.body: No endpoints found that can serve this request \(provider\.only\)/
    )
    assert.match(error.message, /\(custom_id "c1"\)$/)
  })

  it("plans with the size its run is given: a prompt too long for every endpoint's context", () => {
    const long = { messages: [{ role: "user", content: "x".repeat(8_000) }] }
    const error = refused(submission("/v1/chat/completions", "acme/gpt", [say, long]))
    assert.match(error.message, /^requests\[1\]\.body: No endpoints found .*\(context_length\)/)
  })

  it("accepts what the live route would plan; a router's request is planned when it runs", () => {
    const ok = BatchItems.prepare(
      submission("/v1/chat/completions", "anthro/claude", [say, { ...say, plugins: [{ id: "auto-router" }] }]),
      "batch_1",
      snapshot
    )
    assert.isTrue(Either.isRight(ok))
    const routed = BatchItems.prepare(
      submission("/v1/messages", "acme/voice", [{ ...say, plugins: [{ id: "pareto-router" }] }]),
      "batch_1",
      snapshot
    )
    assert.isTrue(Either.isRight(routed))
  })
})
