/**
 * Route planning: a pure function from the request's routing fields and a catalogue snapshot to an
 * ordered list of attempts, each an endpoint with the reason it was chosen. The executor consumes the
 * plan; the reasons become the `service_metadata.pipeline` steps.
 */
import { Either } from "effect"
import type { CatalogueSnapshot, Endpoint, Model } from "../catalogue/Catalogue.js"
import { NotFound, Unavailable } from "../errors/GatewayError.js"

/** What the request needs of an endpoint, derived once from the body. */
export interface Requirements {
  readonly tools: boolean
  readonly images: boolean
  readonly documents: boolean
  readonly maxTokens?: number | undefined
}

/** The routing fields of a request. */
export interface RouteRequest {
  readonly model: string
  readonly models?: ReadonlyArray<string> | undefined
  readonly fallbacks?: ReadonlyArray<{ readonly model: string }> | null | undefined
  readonly requirements: Requirements
}

export interface Attempt {
  readonly model: Model
  readonly endpoint: Endpoint
  /** Why this endpoint is in the plan, at this place. */
  readonly reason: string
}

/** One step of the pipeline that `service_metadata` reports. */
export interface PipelineStep {
  readonly type: string
  readonly name: string
  readonly summary: string
}

export interface RoutePlan {
  readonly attempts: ReadonlyArray<Attempt>
  readonly steps: ReadonlyArray<PipelineStep>
}

/** Why an endpoint cannot serve the request, or undefined when it can. */
export const exclusion = (endpoint: Endpoint, needs: Requirements): string | undefined => {
  const params = endpoint.supportedParameters
  if (needs.tools && params !== undefined && !params.includes("tools")) return "does not support tools"
  const modalities = endpoint.inputModalities
  if (needs.images && modalities !== undefined && !modalities.includes("image")) return "does not accept images"
  if (needs.documents && modalities !== undefined && !modalities.includes("file")) {
    return "does not accept documents"
  }
  if (
    needs.maxTokens !== undefined && endpoint.maxCompletionTokens !== undefined &&
    needs.maxTokens > endpoint.maxCompletionTokens
  ) return `max_tokens ${needs.maxTokens} exceeds its limit of ${endpoint.maxCompletionTokens}`
  return undefined
}

/** Plans the attempts for a request: the primary model, then `models`, then `fallbacks`, each over its endpoints. */
export const plan = (
  request: RouteRequest,
  snapshot: CatalogueSnapshot
): Either.Either<RoutePlan, NotFound | Unavailable> => {
  const primary = snapshot.models.get(request.model)
  if (primary === undefined || primary.endpoints.length === 0) {
    return Either.left(new NotFound({ message: `Model '${request.model}' is not available on this gateway` }))
  }
  const steps: Array<PipelineStep> = []
  const seen = new Set<string>([primary.id])
  const candidates: Array<{ model: Model; role: string }> = [{ model: primary, role: "requested model" }]
  const extra = (ids: ReadonlyArray<string>, role: string) => {
    for (const id of ids) {
      if (seen.has(id)) continue
      seen.add(id)
      const model = snapshot.models.get(id)
      if (model === undefined) {
        steps.push({ type: "routing", name: "skip-model", summary: `${role} '${id}' is not in the catalogue` })
      } else candidates.push({ model, role })
    }
  }
  extra(request.models ?? [], "candidate model")
  extra((request.fallbacks ?? []).map((f) => f.model), "fallback model")

  const attempts: Array<Attempt> = []
  const excluded: Array<string> = []
  for (const { model, role } of candidates) {
    for (const endpoint of model.endpoints) {
      const why = exclusion(endpoint, request.requirements)
      if (why === undefined) {
        attempts.push({ model, endpoint, reason: `${role} ${model.id} via ${endpoint.provider}` })
      } else excluded.push(`${model.id} via ${endpoint.provider}: ${why}`)
    }
  }
  for (const e of excluded) steps.push({ type: "routing", name: "filter", summary: e })
  if (attempts.length === 0) {
    return Either.left(
      new Unavailable({ message: `No endpoint can serve this request: ${excluded.join("; ") || "none configured"}` })
    )
  }
  steps.push({
    type: "routing",
    name: "plan",
    summary: attempts.map((a, i) => `${i + 1}. ${a.reason}`).join("; ")
  })
  return Either.right({ attempts, steps })
}
