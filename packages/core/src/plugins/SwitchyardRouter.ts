/**
 * The `switchyard-router` plugin: a pluggable routing policy behind the `SwitchyardPolicy` port.
 *
 * The plugin has no fields besides `id` and `enabled` (spec 2.1.3 shows none); the operator configures the policy.
 * `choose` classifies the task, describes the request to the policy (task, prompt length, tools, the routable
 * models and the ranked candidates) and routes to the model it names. When the policy names none, or names a model
 * that is not routable, the pareto-router's pick is used and the pipeline says so.
 *
 * The default policy, `fromRules(rules)`, is a rule list read in order: the first rule whose conditions all hold and
 * whose model is routable wins. A condition that is absent always holds:
 * - `tasks`: the classified task is one of them;
 * - `minPromptChars` / `maxPromptChars`: the prompt length is within the bounds (inclusive), the prompt length being
 *   the characters of text of the system prompt and of every message's text;
 * - `tools`: the request has (true) or has not (false) a non-empty `tools` array.
 * With no rules it names nothing, so the pareto-router's pick applies.
 */
import * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type { CatalogueSnapshot, Model, Task } from "../catalogue/Catalogue.js"
import type { InvalidRequest, Unavailable } from "../errors/GatewayError.js"
import type { Plugin } from "../messages/MessagesRequest.js"
import type { Candidate, Choice, RouteFor } from "./Candidates.js"
import { describe, rank, start } from "./Candidates.js"
import { frontier, knee } from "./ParetoRouter.js"
import type { TaskClassifierService } from "./TaskClassifier.js"
import { textOf } from "./TaskClassifier.js"

/** The decoded options of a `switchyard-router` plugin. */
export type SwitchyardRouterPlugin = Extract<Plugin, { readonly id: "switchyard-router" }>

/** What a switchyard policy sees of a request. */
export interface PolicyInput {
  readonly task: Task
  /** Characters of text in the system prompt and in every message. */
  readonly promptChars: number
  /** True when the request has a non-empty `tools` array. */
  readonly hasTools: boolean
  /** The routable models that can serve the request, in catalogue order. */
  readonly models: ReadonlyArray<Model>
  /** The routable models ranked for the task, with cost and cost percentile (see `Candidates`). */
  readonly candidates: ReadonlyArray<Candidate>
  readonly messages: unknown
  readonly system: unknown
}

/** A routing policy: the id of the model to route to, or undefined to leave the choice to the pareto-router. */
export interface SwitchyardPolicyService {
  readonly choose: (input: PolicyInput) => string | undefined
}

/** Port: the switchyard-router's policy. */
export class SwitchyardPolicy extends Context.Tag("@model-gateway/core/SwitchyardPolicy")<
  SwitchyardPolicy,
  SwitchyardPolicyService
>() {}

/** One rule of the default policy: route to `model` when every condition given holds. */
export interface Rule {
  readonly model: string
  readonly tasks?: ReadonlyArray<Task> | undefined
  readonly minPromptChars?: number | undefined
  readonly maxPromptChars?: number | undefined
  readonly tools?: boolean | undefined
}

/** True when every condition of `rule` holds for `input` (its model may still not be routable). */
export const ruleMatches = (rule: Rule, input: PolicyInput): boolean =>
  (rule.tasks === undefined || rule.tasks.includes(input.task)) &&
  (rule.minPromptChars === undefined || input.promptChars >= rule.minPromptChars) &&
  (rule.maxPromptChars === undefined || input.promptChars <= rule.maxPromptChars) &&
  (rule.tools === undefined || rule.tools === input.hasTools)

/** The default policy: the model of the first matching rule whose model is routable. */
export const fromRules = (rules: ReadonlyArray<Rule>): SwitchyardPolicyService => ({
  choose: (input) => {
    for (const rule of rules) {
      if (ruleMatches(rule, input) && input.models.some((m) => m.id === rule.model)) return rule.model
    }
    return undefined
  }
})

/** Provides the rule-list policy. */
export const layer = (rules: ReadonlyArray<Rule>): Layer.Layer<SwitchyardPolicy> =>
  Layer.succeed(SwitchyardPolicy, fromRules(rules))

/** Provides the policy with no rules: every request gets the pareto-router's pick. */
export const defaultLayer: Layer.Layer<SwitchyardPolicy> = layer([])

/** Characters of text in the system prompt and in every message. */
export const promptChars = (messages: unknown, system: unknown): number => {
  let n = textOf(system).length
  if (Array.isArray(messages)) {
    for (const message of messages) {
      if (typeof message === "object" && message !== null) {
        n += textOf((message as { content?: unknown }).content).length
      }
    }
  }
  return n
}

/** What `choose` reads. */
export interface ChooseInput {
  readonly plugin: SwitchyardRouterPlugin
  readonly messages: unknown
  readonly system: unknown
  /** The request's `tools` as sent. */
  readonly tools: unknown
  readonly catalogue: CatalogueSnapshot
  readonly classifier: TaskClassifierService
  readonly policy: SwitchyardPolicyService
  /** The model slug that selects a router; never a candidate. */
  readonly routerSlug: string
  /** The live route's route request for each model; the router chooses among the models it can be planned on. */
  readonly route: RouteFor
}

/** Chooses the model of a switchyard-router request; see the module documentation. */
export const choose = (input: ChooseInput): Either.Either<Choice, InvalidRequest | Unavailable> => {
  const started = start(input.plugin.id, input)
  if (Either.isLeft(started)) return Either.left(started.left)
  const { pool: models, step, steps, task } = started.right
  const { candidates } = rank(models, task)
  const request: PolicyInput = {
    task,
    promptChars: promptChars(input.messages, input.system),
    hasTools: Array.isArray(input.tools) && input.tools.length > 0,
    models,
    candidates,
    messages: input.messages,
    system: input.system
  }
  const named = input.policy.choose(request)
  if (named !== undefined && models.some((m) => m.id === named)) {
    step(`policy chose ${named} (task ${task}, ${request.promptChars} prompt characters, tools ${request.hasTools})`)
    return Either.right({ modelId: named, task, steps })
  }
  const chosen = knee(frontier(candidates))
  step(
    `${named === undefined ? "policy named no model" : `policy named ${named}, which is not routable`}; ` +
      `using the pareto-router's pick, ${describe(chosen)}`
  )
  return Either.right({ modelId: chosen.model.id, task, steps })
}
