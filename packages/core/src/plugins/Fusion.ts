/**
 * The fusion plugin: a panel of models answers in parallel, then the synthesis model answers with their analyses
 * in its system prompt. The request is billed for all of them and has one usage record, the final answer's.
 */
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import { type CatalogueSnapshot, outputsText } from "../catalogue/Catalogue.js"
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
import * as FusionPanelChecks from "./FusionPanelChecks.js"
import * as FusionTools from "./FusionTools.js"
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
    if (!outputsText(model)) continue
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

/**
 * Runs the panel, then the synthesis; a failure before the synthesis is the request's one usage record. The synthesis
 * model is the plugin's `model`, else the first panel model (spec 2.1.3): the request's own `model` is not run. The
 * panel, the synthesis model and the analysts' tools are checked before anything runs (`FusionPanelChecks`,
 * `FusionTools`).
 */
export const fusion = (
  ports: MessagesPorts,
  run: Run,
  plugin: FusionPlugin,
  pluginIndex: number
): Effect.Effect<ExecutionResult, GatewayError.GatewayError> => {
  const panel = panelOf(plugin, ports.options, run.snapshot.models)
  if (panel.length === 0) {
    const error = new GatewayError.InvalidRequest({
      message: "fusion: no analysis_models given, and the catalogue has no model that answers in text",
      param: `plugins[${pluginIndex}]`
    })
    return UsageAccounting.failed(ports.usageLog, run, error, 0)
  }
  const synthesis = plugin.model ?? panel[0]
  const checked = FusionPanelChecks.checkPanel(ports, run, plugin, pluginIndex, panel, synthesis)
  if (Either.isLeft(checked)) return UsageAccounting.failed(ports.usageLog, run, checked.left, 0)
  const tools = FusionTools.analystTools(plugin, pluginIndex, ports.webSearch)
  if (Either.isLeft(tools)) return UsageAccounting.failed(ports.usageLog, run, tools.left, 0)
  return Admission.admitted(
    ports.quotas,
    ports.usageLog,
    run,
    () => demandOf(run, [...checked.right.analysts, synthesis]),
    (admitted) => fused(ports, admitted, checked.right, tools.right, synthesis),
    Admission.tellResult
  )
}

const fused = (
  ports: MessagesPorts,
  run: Run,
  panel: FusionPanelChecks.CheckedPanel,
  tools: FusionTools.AnalystTools,
  synthesis: string
): Effect.Effect<ExecutionResult, GatewayError.GatewayError> =>
  Effect.flatMap(analyses(ports, run, panel, tools), (done) => {
    if (done.texts.length === 0) {
      const error = FusionPanelChecks.panelFailure([...panel.skipped, ...done.failures], panel.param)
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

const failedStep = (model: string, error: GatewayError.GatewayError) => ({
  type: "plugin" as const,
  name: "fusion",
  summary: `analysis by ${model} failed: ${error.message}`
})

/**
 * The panel's answers as JSON, in parallel and unrecorded, after the analysts' tools ran; each failure (and each
 * analyst skipped before, as no endpoint can serve it) is a pipeline step.
 */
const analyses = (
  ports: MessagesPorts,
  run: Run,
  { analysts, skipped }: FusionPanelChecks.CheckedPanel,
  tools: FusionTools.AnalystTools
) => {
  for (const f of skipped) run.steps.push(failedStep(f.model, f.error))
  const base: JsonObject = { ...run.body, stream: false }
  delete base.plugins
  const answers = Effect.flatMap(
    FusionTools.withTools(ports.webSearch, base, tools, run.steps),
    (analysisBody) =>
      Effect.forEach(analysts, (m) =>
        Effect.either(execute(ports, {
          ...run,
          modelId: m,
          body: { ...analysisBody, model: m },
          stream: false,
          steps: [],
          extra: undefined,
          recordUsage: false
        })), { concurrency: "unbounded" })
  )
  return Effect.map(answers, (results) => {
    let usage = UsageAccounting.zeroUsage
    const costs: Array<string> = []
    const texts: Array<string> = []
    const failures: Array<FusionPanelChecks.Failure> = []
    results.forEach((result, i) => {
      const model = analysts[i]
      if (Either.isLeft(result) || result.right.answer === undefined || result.right.charge === undefined) {
        const error = Either.isLeft(result)
          ? result.left
          : new GatewayError.InternalError({ message: "the analysis gave no answer" })
        failures.push({ model, error })
        run.steps.push(failedStep(model, error))
        return
      }
      usage = UsageAccounting.addUsage(usage, result.right.charge.usage)
      costs.push(result.right.charge.cost)
      texts.push(`Analysis by ${model}:\n${messageText(result.right.answer)}`)
      run.steps.push({ type: "plugin", name: "fusion", summary: `analysis by ${model} done` })
    })
    return { usage, costs, texts, failures }
  })
}
