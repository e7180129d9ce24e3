/**
 * The route of a speech request: the route planner's (provider preferences, `models` and `fallbacks`, health,
 * stickiness, the weighted choice), over the candidate models that synthesize speech, each with only the endpoints
 * that support what its references need (spec 2.3, rules 3 and 4). A pure function, like `RoutePlanner.plan`.
 *
 * A model synthesizes speech when its `outputModalities` include `audio`. The requested model unknown (or without
 * endpoints): 404. Known but not a speech model: 400. No endpoint of any candidate model has the capability the
 * references need: 400 naming it, since no retry can help (never 503).
 */
import * as Either from "effect/Either"
import type { CatalogueSnapshot, Endpoint, Model } from "../catalogue/Catalogue.js"
import { InvalidRequest, NotFound } from "../errors/GatewayError.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import type { Needs } from "./SpeechReferences.js"
import type { SpeechRequest } from "./SpeechRequest.js"

/** True when a model synthesizes speech (`outputModalities` includes `audio`). */
export const isSpeechModel = (model: Model): boolean => model.outputModalities?.includes("audio") ?? false

/** The capability an endpoint lacks for `needs`, named as in the catalogue; undefined when it has them all. */
export const missingCapability = (endpoint: Endpoint, needs: Needs): string | undefined => {
  if (needs.voiceCloning && !endpoint.supportsVoiceCloning) return "voice cloning"
  if (needs.multipleAudioReferences && !endpoint.supportsMultipleAudioReferences) return "multiple audio references"
  if (needs.imageReference && !endpoint.supportsImageReference) return "image references"
  return undefined
}

const step = (name: string, summary: string): RoutePlanner.PipelineStep => ({ type: "routing", name, summary })

const whatNeeds = (needs: Needs): string =>
  needs.imageReference
    ? "an image reference (input_references with an image_url part)"
    : needs.multipleAudioReferences
    ? "voice cloning from several audio clips (input_references with more than one input_audio part)"
    : "voice cloning (input_references with an input_audio part)"

/**
 * Plans the attempts of a speech request. `needs` is what its references ask of an endpoint; `context` carries
 * health, the session and the random source, as for `RoutePlanner.plan`.
 */
export const plan = (
  request: SpeechRequest,
  needs: Needs,
  snapshot: CatalogueSnapshot,
  context: RoutePlanner.RouteContext = {}
): Either.Either<RoutePlanner.RoutePlan, NotFound | InvalidRequest> => {
  const primary = snapshot.models.get(request.model)
  if (primary === undefined || primary.endpoints.length === 0) {
    return Either.left(new NotFound({ message: `Model '${request.model}' is not available on this gateway` }))
  }
  if (!isSpeechModel(primary)) {
    return Either.left(
      new InvalidRequest({
        message: `Model '${request.model}' does not synthesize speech (it has no endpoint that outputs audio)`,
        param: "model"
      })
    )
  }
  const steps: Array<RoutePlanner.PipelineStep> = []
  const usable: Array<Model> = []
  const seen = new Set<string>()
  const missing = new Set<string>()
  const ids = [request.model, ...(request.models ?? []), ...(request.fallbacks ?? []).map((f) => f.model)]
  for (const id of ids) {
    if (seen.has(id)) continue
    seen.add(id)
    const model = snapshot.models.get(id)
    if (model === undefined) {
      steps.push(step("skip-model", `candidate model '${id}' is not in the catalogue`))
      continue
    }
    if (!isSpeechModel(model)) {
      steps.push(step("skip-model", `candidate model '${id}' does not synthesize speech`))
      continue
    }
    const endpoints = model.endpoints.filter((endpoint) => {
      const lacks = missingCapability(endpoint, needs)
      if (lacks === undefined) return true
      missing.add(lacks)
      steps.push(step("filter", `${model.id} via ${endpoint.provider} removed: it does not support ${lacks}`))
      return false
    })
    if (endpoints.length > 0) {
      usable.push(endpoints.length === model.endpoints.length ? model : { ...model, endpoints })
    }
  }
  if (usable.length === 0) {
    return Either.left(
      new InvalidRequest({
        message: `No endpoints found that can serve this request: it needs ${whatNeeds(needs)}, and no endpoint of ${
          ids.length === 1 ? `'${request.model}'` : "its candidate models"
        } supports ${[...missing].join(" and ")}`,
        param: "input_references"
      })
    )
  }
  // The first usable model takes the requested model's place; the others keep their order, as candidates.
  const [first, ...rest] = usable
  const planned = RoutePlanner.plan(
    {
      model: first.id,
      models: rest.map((m) => m.id),
      requirements: { tools: false, images: false, documents: false },
      provider: RoutePlanner.effectivePreferences(request.preferences)
    },
    { models: new Map(usable.map((m) => [m.id, m] as const)) },
    context
  )
  return Either.map(planned, (p) => ({ attempts: p.attempts, steps: [...steps, ...p.steps] }))
}
