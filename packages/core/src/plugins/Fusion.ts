/**
 * The fusion plugin: a panel of models answers in parallel, then the synthesis model answers with their analyses
 * in its system prompt. The request is billed for all of them and has one usage record, the final answer's.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import type { CatalogueSnapshot } from "../catalogue/Catalogue.js"
import * as GatewayError from "../errors/GatewayError.js"
import * as Admission from "../execution/Admission.js"
import * as Quotas from "../limits/Quotas.js"
import { execute } from "../messages/Execution.js"
import type { MessagesOptions, MessagesPorts } from "../messages/MessagesPorts.js"
import type { ExecutionResult, Run } from "../messages/Run.js"
import { estimatePromptTokens } from "../messages/UpstreamBody.js"
import * as UsageAccounting from "../messages/UsageAccounting.js"
import { appendSystem, type JsonObject, messageText } from "../messages/Wire.js"
import * as Cost from "../pricing/Cost.js"
import type { Plugins } from "./RequestPlugins.js"

type FusionPlugin = NonNullable<Plugins["fusion"]>

/** How many models the built-in panel has (spec 2.1.3: "a built-in panel of three models"). */
export const BUILT_IN_PANEL_SIZE = 3

/**
 * The built-in panel, when neither the request nor the configuration names one: the catalogue's first three models
 * that answer in text, in configuration order (a self-hosted gateway has no fixed models of its own to name).
 */
export const builtInPanel = (models: CatalogueSnapshot["models"]): ReadonlyArray<string> => {
  const panel: Array<string> = []
  for (const [id, model] of models) {
    if (model.outputModalities !== undefined && !model.outputModalities.includes("text")) continue
    panel.push(id)
    if (panel.length === BUILT_IN_PANEL_SIZE) break
  }
  return panel
}

/** The analysis models: the plugin's, its preset's, the configured default panel, or the built-in one. */
export const panelOf = (
  plugin: FusionPlugin,
  options: MessagesOptions,
  models: CatalogueSnapshot["models"]
): ReadonlyArray<string> =>
  plugin.analysis_models ??
    (plugin.preset === undefined ? undefined : options.fusion?.presets?.[plugin.preset]) ??
    options.fusion?.panel ??
    builtInPanel(models)

/**
 * What a fusion request asks of the limits: every model's (the panel's and the synthesis's) prompt, output cap and
 * dearest endpoint, summed; it is admitted once, before the panel runs.
 */
const demandOf = (run: Run, models: ReadonlyArray<string>): Quotas.Demand => {
  const input = estimatePromptTokens(run.body, run.context.bodyBytes, undefined)
  const maxTokens = typeof run.request.max_tokens === "number" ? run.request.max_tokens : undefined
  let outputTokens = 0
  let costNanoUsd = 0
  for (const id of models) {
    const model = run.snapshot.models.get(id)
    if (model === undefined) continue
    const one = Quotas.demandOf(
      model.endpoints.map((endpoint) => ({ model, endpoint, reason: "fusion" })),
      input,
      maxTokens
    )
    outputTokens += one.outputTokens
    costNanoUsd += one.costNanoUsd
  }
  return { inputTokens: input * models.length, outputTokens, outputCapped: maxTokens !== undefined, costNanoUsd }
}

/** Runs the panel, then the synthesis; a failure before the synthesis is the request's one usage record. */
export const fusion = (
  ports: MessagesPorts,
  run: Run,
  plugin: FusionPlugin
): Effect.Effect<ExecutionResult, GatewayError.GatewayError> => {
  const panel = panelOf(plugin, ports.options, run.snapshot.models)
  if (panel.length === 0) {
    const error = new GatewayError.InvalidRequest({
      message: "fusion: no analysis_models given, and the catalogue has no model that answers in text",
      param: "plugins"
    })
    return UsageAccounting.failed(ports.usageLog, run, error, 0)
  }
  const synthesis = plugin.model ?? (run.snapshot.models.has(run.modelId) ? run.modelId : panel[0])
  return Admission.admitted(
    ports.quotas,
    ports.usageLog,
    run,
    () => demandOf(run, [...panel, synthesis]),
    (admitted) => fused(ports, admitted, panel, synthesis),
    Admission.tellResult
  )
}

const fused = (
  ports: MessagesPorts,
  run: Run,
  panel: ReadonlyArray<string>,
  synthesis: string
): Effect.Effect<ExecutionResult, GatewayError.GatewayError> =>
  Effect.flatMap(analyses(ports, run, panel), (done) => {
    if (done.texts.length === 0) {
      const error = new GatewayError.Unavailable({ message: "fusion: every analysis model failed" })
      return UsageAccounting.failed(ports.usageLog, run, error, 0)
    }
    run.steps.push({
      type: "plugin",
      name: "fusion",
      summary: `${synthesis} synthesizes ${done.texts.length} analyses`
    })
    const body = appendSystem(
      run.body,
      `Several analysts answered the conversation below. Synthesize the best final answer from their analyses.\n\n${
        done.texts.join("\n\n")
      }`
    )
    return execute(ports, {
      ...run,
      body: { ...body, model: synthesis },
      modelId: synthesis,
      extra: { usage: done.usage, cost: Cost.sumDecimals(done.costs) }
    })
  })

/** The panel's answers as JSON, in parallel and unrecorded; each failure is a pipeline step. */
const analyses = (ports: MessagesPorts, run: Run, panel: ReadonlyArray<string>) => {
  const analysisBody: JsonObject = { ...run.body, stream: false }
  delete analysisBody.plugins
  return Effect.map(
    Effect.forEach(panel, (m) =>
      Effect.either(execute(ports, {
        ...run,
        modelId: m,
        body: { ...analysisBody, model: m },
        stream: false,
        steps: [],
        extra: undefined,
        recordUsage: false
      })), { concurrency: "unbounded" }),
    (results) => {
      let usage = UsageAccounting.zeroUsage
      const costs: Array<string> = []
      const texts: Array<string> = []
      results.forEach((result, i) => {
        if (Either.isLeft(result) || result.right.answer === undefined || result.right.charge === undefined) {
          run.steps.push({ type: "plugin", name: "fusion", summary: `analysis by ${panel[i]} failed` })
          return
        }
        usage = UsageAccounting.addUsage(usage, result.right.charge.usage)
        costs.push(result.right.charge.cost)
        texts.push(`Analysis by ${panel[i]}:\n${messageText(result.right.answer)}`)
        run.steps.push({ type: "plugin", name: "fusion", summary: `analysis by ${panel[i]} done` })
      })
      return { usage, costs, texts }
    }
  )
}
