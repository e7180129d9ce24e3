/**
 * A Responses request that continues a stored response (`previous_response_id`) can only be answered where that
 * response is stored: the endpoint that answered it, or another endpoint of its provider (the same account). When
 * the gateway knows that endpoint and the plan holds it, the plan keeps to its provider: that endpoint first while it
 * is healthy, the provider's other endpoints after it, and no endpoint of another provider, which would answer 400
 * `previous_response_not_found` (or, for a failure of the endpoint, turn a retryable 5xx into that 400). An endpoint
 * that is not healthy keeps its place among its provider's endpoints: it is still tried, as the only ones that can
 * answer. When the plan does not hold it (a filter, the provider preferences or another model left it out), the plan
 * is left as it is.
 */
import type { Ranked } from "./CandidateOrder.js"
import { healthy, label, withNote } from "./RouteCandidates.js"
import type { PipelineStep, StoredResponse } from "./RouteTypes.js"
import { step } from "./RouteTypes.js"

/** The plan `ranked` kept to the provider that holds `response`, with the `response` steps that say so. */
export const keepToStoredResponse = (
  ranked: ReadonlyArray<Ranked>,
  response: StoredResponse,
  steps: Array<PipelineStep>
): ReadonlyArray<Ranked> => {
  const at = ranked.findIndex((r) => r.candidate.endpoint.id === response.endpointId)
  if (at < 0) {
    steps.push(step(
      "response",
      `previous response ${response.id} is stored at endpoint ${response.endpointId}, which is not eligible for this ` +
        "request: routed as without it"
    ))
    return ranked
  }
  const c = ranked[at].candidate
  const provider = c.endpoint.provider
  const others = ranked.filter((r) => r.candidate.endpoint.provider !== provider)
  if (others.length > 0) {
    steps.push(step(
      "response",
      `not trying ${others.map((r) => label(r.candidate)).join(", ")}: previous response ${response.id} is stored at ` +
        provider
    ))
  }
  const kept = ranked.filter((r) => r.candidate.endpoint.provider === provider)
  if (!healthy(c)) {
    steps.push(
      step("response", `${label(c)} stores previous response ${response.id}; not moved first: it is not healthy`)
    )
    return kept
  }
  steps.push(step("response", `${label(c)} first: it stores previous response ${response.id}`))
  return [
    { candidate: c, why: withNote("stores the previous response", c) },
    ...kept.filter((r) => r.candidate !== c)
  ]
}
