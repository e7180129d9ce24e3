import type { Endpoint, Model, Task } from "../../src/catalogue/Catalogue.js"
import type { TaskClassifierService } from "../../src/plugins/TaskClassifier.js"

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
