/**
 * What fusion checks of its panel and synthesis model before running anything, and the status of a panel that
 * failed. A status is a promise (docs/decisions.md, "Fusion's failures"):
 * - an analysis or synthesis model the catalogue does not have (or has without endpoints) is a 404, before any
 *   upstream call, as an unknown `model` is;
 * - an analyst that no endpoint can serve (a capability, the context length, the provider preferences) is skipped,
 *   said in the pipeline; when none is left, or the synthesis model cannot be served, the request is a 400 naming
 *   why, before any upstream call;
 * - when every analyst that ran failed: 503 `overloaded_error` only when at least one failed for a reason that may
 *   pass (overloaded, unavailable, rate-limited, timed out, an upstream 5xx), since the synthesis needs just one
 *   analysis; otherwise the request cannot succeed as it is: 400 when every failure was the request's (upstream
 *   4xx), 502 when one was the gateway's own configuration (its provider credentials, an upstream model id).
 */
import * as Either from "effect/Either"
import * as GatewayError from "../errors/GatewayError.js"
import { routeOf } from "../messages/Execution.js"
import type { MessagesPorts } from "../messages/MessagesPorts.js"
import type { Run } from "../messages/Run.js"
import * as RoutePlanner from "../routing/RoutePlanner.js"
import type { Plugins } from "./RequestPlugins.js"

type FusionPlugin = NonNullable<Plugins["fusion"]>

/** An analyst that did not answer, and why. */
export interface Failure {
  readonly model: string
  readonly error: GatewayError.GatewayError
}

/** The analysts that can be served (in panel order), and those skipped because no endpoint can serve them. */
export interface CheckedPanel {
  readonly analysts: ReadonlyArray<string>
  readonly skipped: ReadonlyArray<Failure>
  /** The field a 400 about the panel names: `plugins[i].analysis_models`, or `plugins[i]` for a configured panel. */
  readonly param: string
}

const where = (plugin: FusionPlugin, pluginIndex: number, j: number): string =>
  plugin.analysis_models !== undefined
    ? `plugins[${pluginIndex}].analysis_models[${j}]`
    : plugin.preset !== undefined
    ? `the preset ${plugin.preset}'s panel`
    : "the gateway's default panel"

const notFound = (role: string, id: string, at: string, routerSlug: string) =>
  new GatewayError.NotFound({
    message: `fusion: the ${role} '${id}' (${at}) is not available on this gateway${
      id === routerSlug ? `: '${routerSlug}' is the auto-router's slug; name catalogue models` : ""
    }`
  })

const listed = (failures: ReadonlyArray<Failure>): string =>
  failures.map((f) => `${f.model}: ${f.error.message}`).join("; ")

/**
 * Checks the panel and the synthesis model against the catalogue and plans each one's route (pure: health only
 * orders endpoints, it never removes one). Fails with the 404 or 400 described above.
 */
export const checkPanel = (
  ports: Pick<MessagesPorts, "parser" | "routerSlug">,
  run: Run,
  plugin: FusionPlugin,
  pluginIndex: number,
  panel: ReadonlyArray<string>,
  synthesis: string
): Either.Either<CheckedPanel, GatewayError.NotFound | GatewayError.InvalidRequest> => {
  const servable = (id: string) => {
    const model = run.snapshot.models.get(id)
    return model !== undefined && model.endpoints.length > 0
  }
  for (const [j, id] of panel.entries()) {
    if (!servable(id)) {
      return Either.left(notFound("analysis model", id, where(plugin, pluginIndex, j), ports.routerSlug))
    }
  }
  if (!servable(synthesis)) {
    const at = plugin.model !== undefined ? `plugins[${pluginIndex}].model` : "the first panel model"
    return Either.left(notFound("synthesis model", synthesis, at, ports.routerSlug))
  }
  const plan = (id: string) => RoutePlanner.plan(routeOf(ports, { ...run, modelId: id }).request, run.snapshot)
  const synthesisPlan = plan(synthesis)
  if (Either.isLeft(synthesisPlan)) {
    const at = plugin.model !== undefined ? `plugins[${pluginIndex}].model` : `plugins[${pluginIndex}]`
    return Either.left(
      new GatewayError.InvalidRequest({
        message:
          `${at}: fusion: the synthesis model ${synthesis} cannot serve this request: ${synthesisPlan.left.message}`,
        param: at
      })
    )
  }
  const param = plugin.analysis_models !== undefined
    ? `plugins[${pluginIndex}].analysis_models`
    : `plugins[${pluginIndex}]`
  const analysts: Array<string> = []
  const skipped: Array<Failure> = []
  for (const id of panel) {
    const planned = plan(id)
    if (Either.isLeft(planned)) skipped.push({ model: id, error: planned.left })
    else analysts.push(id)
  }
  if (analysts.length === 0) {
    return Either.left(
      new GatewayError.InvalidRequest({
        message: `${param}: fusion: no analysis model can serve this request: ${listed(skipped)}`,
        param
      })
    )
  }
  return Either.right({ analysts, skipped, param })
}

/** Failures that may pass: a retry of the same request may get an analysis (`GatewayError.mayPass`). */
export const mayPass = GatewayError.mayPass

/** The error of a panel none of whose analysts answered (see the module documentation for the rule). */
export const panelFailure = (failures: ReadonlyArray<Failure>, param: string): GatewayError.GatewayError => {
  if (failures.some((f) => mayPass(f.error))) {
    return new GatewayError.Unavailable({
      message: `fusion: every analysis model failed, at least one for a reason that may pass; retry later: ${
        listed(failures)
      }`
    })
  }
  if (failures.every((f) => GatewayError.describe(f.error).status < 500)) {
    return new GatewayError.InvalidRequest({
      message: `${param}: fusion: no analysis model can answer this request: ${listed(failures)}`,
      param
    })
  }
  return new GatewayError.UpstreamRejected({
    message: `fusion: no analysis model answered, and retrying will not help: ${listed(failures)}`,
    status: 502,
    errorType: "api_error"
  })
}
