import type { Endpoint, Model, Task } from "../../src/catalogue/Catalogue.js"
import type { RouteFor } from "../../src/plugins/Candidates.js"
import type { TaskClassifierService } from "../../src/plugins/TaskClassifier.js"
import type { ProviderPreferences, Requirements } from "../../src/routing/RoutePlanner.js"

export const endpoint = (modelId: string, prompt: string, completion = "0", provider = "p"): Endpoint => ({
  id: `${modelId}@${provider}`,
  modelId,
  provider,
  upstreamModel: modelId,
  pricing: { prompt, completion, request: "0", image: "0" },
  zdr: false,
  dataCollection: "allow",
  supportsVoiceCloning: false,
  supportsMultipleAudioReferences: false,
  supportsImageReference: false
})

/** A model with one endpoint at `cost` per prompt token, scored `score` for every task (or unscored). */
export const model = (id: string, cost: number, score?: number): Model => ({
  id,
  name: id,
  endpoints: [endpoint(id, String(cost))],
  ...(score === undefined ? {} : { scores: { code: score, math: score, writing: score, analysis: score, chat: score } })
})

/** A classifier that always answers `task`. */
export const always = (task: Task): TaskClassifierService => ({ classify: () => task })

/** The live route's request for each model: `api` (chat by default) with no other needs unless given. */
export const routeFor =
  (requirements: Partial<Requirements> = {}, provider?: ProviderPreferences): RouteFor => (model) => ({
    model: model.id,
    requirements: { api: "chat", tools: false, images: false, documents: false, ...requirements },
    provider
  })
